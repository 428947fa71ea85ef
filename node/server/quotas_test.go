package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tenantsWithQuotas is an identities file of two tenants, writers of
// namespaces ta and tb, whose "t*" quota is maxSessions sessions and two
// keys per shared scope.
func tenantsWithQuotas(maxSessions string) string {
	return `{"principals":[
		{"name":"a","token_sha256":["` + hashHex("tok-a") + `"],"grants":[{"namespace":"ta","role":"writer"}]},
		{"name":"b","token_sha256":["` + hashHex("tok-b") + `"],"grants":[{"namespace":"tb","role":"writer"}]}],
	"quotas":[{"namespace":"t*","max_sessions":` + maxSessions + `,"max_scope_keys":2},{"namespace":"other","max_sessions":1}]}`
}

func wantQuotaRefusal(t *testing.T, err error, ns, quota string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), `namespace "`+ns+`"`) || !strings.Contains(st.Message(), quota) {
		t.Fatalf("got %v %q, want FAILED_PRECONDITION naming namespace %q and %q", st.Code(), st.Message(), ns, quota)
	}
}

// A tenant that fills its quotas is refused, FAILED_PRECONDITION naming
// its namespace and the quota, and the other tenant under the same
// pattern is not affected; concurrent creates for the last slot take it
// once; a reload changes the quotas with the principals.
func TestTenantQuotas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "identities.json")
	writeFile(t, path, tenantsWithQuotas("3"))
	n := startAuthNode(t, path, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := as(ctx, testPrincipal{name: "a", token: "tok-a"}), as(ctx, testPrincipal{name: "b", token: "tok-b"})
	create := func(ctx context.Context, ns string) (string, error) {
		r, err := n.ss.Create(ctx, &sessionv1.CreateSessionRequest{Namespace: ns, ActorName: "quota"})
		return r.GetSession().GetSessionId(), err
	}
	first, err := create(a, "ta")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create(a, "ta"); err != nil {
		t.Fatal(err)
	}
	// Eight creates race for a's last slot: exactly one takes it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	codesSeen := map[codes.Code]int{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := create(a, "ta")
			mu.Lock()
			codesSeen[status.Code(err)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codesSeen[codes.OK] != 1 || codesSeen[codes.FailedPrecondition] != 7 {
		t.Fatalf("eight creates for the last slot: %v, want one OK and seven FAILED_PRECONDITION", codesSeen)
	}
	_, err = create(a, "ta")
	wantQuotaRefusal(t, err, "ta", "3 sessions")
	list, err := n.ss.List(a, &sessionv1.ListSessionsRequest{Namespace: "ta"})
	if err != nil || len(list.GetSessions()) != 3 {
		t.Fatalf("namespace ta holds %d sessions (%v), want 3", len(list.GetSessions()), err)
	}
	// b, under the same pattern, has its own three.
	var bs string
	for range 3 {
		if bs, err = create(b, "tb"); err != nil {
			t.Fatalf("b's create while a is full: %v", err)
		}
	}

	// Keys per shared scope: a's scope is full at two keys, b's is not.
	scopes := func(ns string, keys ...string) []*sessionv1.ScopeDelta {
		d := &sessionv1.StateDelta{SetJson: map[string]string{}}
		for _, k := range keys {
			d.SetJson[k] = "1"
		}
		return []*sessionv1.ScopeDelta{{Scope: "app:" + ns, Delta: d}}
	}
	if _, err := n.ss.Append(a, &sessionv1.AppendRequest{SessionId: first, ScopeDeltas: scopes("ta", "x", "y")}); err != nil {
		t.Fatal(err)
	}
	_, err = n.ss.Append(a, &sessionv1.AppendRequest{SessionId: first, ScopeDeltas: scopes("ta", "z")})
	wantQuotaRefusal(t, err, "ta", "2 keys per shared scope")
	_, err = n.ss.UpdateScopes(a, &sessionv1.UpdateScopesRequest{ScopeDeltas: scopes("ta", "z")})
	wantQuotaRefusal(t, err, "ta", "2 keys per shared scope")
	if _, err := n.ss.Append(b, &sessionv1.AppendRequest{SessionId: bs, ScopeDeltas: scopes("tb", "x", "y")}); err != nil {
		t.Fatalf("b's scope while a's is full: %v", err)
	}
	st, err := n.ss.GetState(a, &sessionv1.GetStateRequest{SessionId: first, Scopes: []string{"app:ta"}})
	if err != nil || len(st.GetScopes()) != 1 || st.GetScopes()[0].GetStateJson() != `{"x":1,"y":1}` {
		t.Fatalf("a's scope after the refusals: %v (%v)", st.GetScopes(), err)
	}

	// A reload raises the quota (a delete freeing a slot is the stores'
	// conformance suite's).
	writeFile(t, path, tenantsWithQuotas("4"))
	if err := n.s.reloadAuth(); err != nil {
		t.Fatal(err)
	}
	if _, err := create(a, "ta"); err != nil {
		t.Fatalf("a's create after the quota was raised: %v", err)
	}
	_, err = create(a, "ta")
	wantQuotaRefusal(t, err, "ta", "4 sessions")
}

// A namespace past its quota of stored bytes is refused, naming it and
// the quota, and stores nothing; the other tenant's writes go on; a
// delete frees bytes; a reload that raises the quota lets the write in.
func TestTenantBytesQuota(t *testing.T) {
	path := filepath.Join(t.TempDir(), "identities.json")
	file := func(maxBytes string) string {
		return strings.Replace(tenantsWithQuotas("10"), `"max_scope_keys":2}`, `"max_scope_keys":2,"max_bytes":`+maxBytes+`}`, 1)
	}
	writeFile(t, path, file("300"))
	n := startAuthNode(t, path, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := as(ctx, testPrincipal{name: "a", token: "tok-a"}), as(ctx, testPrincipal{name: "b", token: "tok-b"})
	session := func(ctx context.Context, ns string) string {
		r, err := n.ss.Create(ctx, &sessionv1.CreateSessionRequest{Namespace: ns, ActorName: "bytes"})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetSession().GetSessionId()
	}
	appendText := func(ctx context.Context, id string, size int) (*sessionv1.AppendResponse, error) {
		return n.ss.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_USER, Content: strings.Repeat("x", size)}}})
	}
	sa, sb := session(a, "ta"), session(b, "tb")
	if _, err := appendText(a, sa, 200); err != nil {
		t.Fatal(err)
	}
	_, err := appendText(a, sa, 200)
	wantQuotaRefusal(t, err, "ta", "300 stored bytes")
	if msgs, err := n.ss.ListMessages(a, &sessionv1.ListMessagesRequest{SessionId: sa}); err != nil || len(msgs.GetMessages()) != 1 {
		t.Fatalf("ta's session after the refusal: %d messages (%v), want 1", len(msgs.GetMessages()), err)
	}
	if _, err := appendText(b, sb, 250); err != nil {
		t.Fatalf("b's append while a is full: %v", err)
	}
	writeFile(t, path, file("1000"))
	if err := n.s.reloadAuth(); err != nil {
		t.Fatal(err)
	}
	if _, err := appendText(a, sa, 200); err != nil {
		t.Fatalf("a's append after the quota was raised: %v", err)
	}
}

// A namespace takes its most specific entry's quota; a section that does
// not make sense is refused naming the entry.
func TestParseQuotas(t *testing.T) {
	q, err := parseQuotas([]quotaSpec{{Namespace: "*", MaxSessions: 1}, {Namespace: "team-*", MaxSessions: 2},
		{Namespace: "team-a*", MaxSessions: 3}, {Namespace: "team-a", MaxSessions: 4, MaxScopeKeys: 5}})
	if err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]int64{"x": 1, "team-b": 2, "team-ab": 3, "team-a": 4} {
		if got := q.Quota(ns).MaxSessions; got != want {
			t.Errorf("namespace %q: max_sessions %d, want %d", ns, got, want)
		}
	}
	for _, bad := range []struct {
		json, want string
	}{
		{`{"quotas":[{"max_sessions":1}]}`, "has no namespace"},
		{`{"quotas":[{"namespace":"a"},{"namespace":"a"}]}`, "appears twice"},
		{`{"quotas":[{"namespace":"a","max_sessions":-1}]}`, "negative"},
		{`{"quotas":[{"namespace":"a","max_scope_keys":1025}]}`, "more than a state holds"},
		{`{"quotas":[{"namespace":"a","max_bytes":-1}]}`, "negative"},
		{`{"quotas":[{"namespace":"a","max_widgets":1}]}`, "unknown field"},
	} {
		doc := strings.Replace(tenantsWithQuotas("1"), `"quotas":[{"namespace":"t*","max_sessions":1,"max_scope_keys":2},{"namespace":"other","max_sessions":1}]`,
			strings.TrimSuffix(strings.TrimPrefix(bad.json, "{"), "}"), 1)
		if _, err := parseIdentities([]byte(doc)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error saying %q", bad.json, err, bad.want)
		}
	}
	if ids, err := parseIdentities([]byte(appIdentities("t"))); err != nil || ids.storeQuotas() != nil {
		t.Errorf("a file without quotas: %v, %v; want the defaults", ids.storeQuotas(), err)
	}
}

// The example of docs/OPERATIONS.md (Tenants: quotas) loads and means what
// the text says: the most specific entry wins, absent fields are defaults.
func TestOperationsExampleQuotas(t *testing.T) {
	doc, err := os.ReadFile("../../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Tenants: quotas")
	_, block, ok2 := strings.Cut(section, "```json\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/OPERATIONS.md has no Tenants: quotas section with a JSON example")
	}
	ids, err := parseIdentities([]byte(block))
	if err != nil {
		t.Fatalf("the example does not load: %v", err)
	}
	q := ids.storeQuotas()
	for ns, want := range map[string]persistence.Quota{
		"anything": {MaxSessions: 100000},
		"team-x":   {MaxSessions: 1000, MaxScopeKeys: 256},
		"support":  {MaxSessions: 5000, MaxBytes: 10 << 30},
	} {
		if got := q.Quota(ns); got != want {
			t.Errorf("namespace %q: %+v, want %+v", ns, got, want)
		}
	}
}
