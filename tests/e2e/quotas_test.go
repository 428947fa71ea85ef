package e2e_test

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// quotaIdentities: "app" writes namespace team, "other" namespace other;
// team may hold three sessions and two keys per shared scope.
const quotaIdentities = `{"principals":[
  {"name":"app","token_sha256":["%APP%"],"grants":[{"namespace":"team","role":"writer"}]},
  {"name":"other","token_sha256":["%OTHER%"],"grants":[{"namespace":"other","role":"writer"}]}],
 "quotas":[{"namespace":"team","max_sessions":3,"max_scope_keys":2}]}`

// TestQuotasHoldAcrossAKill fills a tenant's quotas with concurrent
// writes, kills the node with SIGKILL and restarts it on its database:
// the quotas still hold exactly (three sessions, two scope keys, not one
// more), and the other tenant is not affected before or after.
func TestQuotasHoldAcrossAKill(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "identities.json")
	writeFile(t, path, strings.NewReplacer("%APP%", tokenHash("app-token"), "%OTHER%", tokenHash("other-token")).Replace(quotaIdentities))
	n := startNode(t, "--auth-file", path)
	ctx := ctxT(t)
	app := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer app-token")
	other := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer other-token")

	// Six creates race for team's three slots.
	api := sessionv1.NewSessionServiceClient(n.conn())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var created []string
	refused := 0
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := api.Create(app, &sessionv1.CreateSessionRequest{Namespace: "team", ActorName: "q"})
			mu.Lock()
			defer mu.Unlock()
			switch status.Code(err) {
			case codes.OK:
				created = append(created, r.GetSession().GetSessionId())
			case codes.FailedPrecondition:
				refused++
			default:
				t.Errorf("a create: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(created) != 3 || refused != 3 {
		t.Fatalf("six creates for three slots: %d created, %d refused", len(created), refused)
	}
	keys := func(ks ...string) []*sessionv1.ScopeDelta {
		d := &sessionv1.StateDelta{SetJson: map[string]string{}}
		for _, k := range ks {
			d.SetJson[k] = "1"
		}
		return []*sessionv1.ScopeDelta{{Scope: "app:team", Delta: d}}
	}
	if _, err := api.Append(app, &sessionv1.AppendRequest{SessionId: created[0], ScopeDeltas: keys("a", "b")}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Create(other, &sessionv1.CreateSessionRequest{Namespace: "other", ActorName: "o"}); err != nil {
		t.Fatalf("the other tenant while team is full: %v", err)
	}

	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n.exited
	n2 := startNodeOn(t, n.dir, "--auth-file", path)
	api2 := sessionv1.NewSessionServiceClient(n2.conn())
	wantRefused := func(err error, quota string) {
		t.Helper()
		st := status.Convert(err)
		if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), `namespace "team"`) || !strings.Contains(st.Message(), quota) {
			t.Fatalf("after the restart: %v %q, want FAILED_PRECONDITION naming namespace team and %q", st.Code(), st.Message(), quota)
		}
	}
	_, err := api2.Create(app, &sessionv1.CreateSessionRequest{Namespace: "team", ActorName: "q"})
	wantRefused(err, "3 sessions")
	_, err = api2.Append(app, &sessionv1.AppendRequest{SessionId: created[1], ScopeDeltas: keys("c")})
	wantRefused(err, "2 keys per shared scope")
	list, err := api2.List(app, &sessionv1.ListSessionsRequest{Namespace: "team"})
	if err != nil || len(list.GetSessions()) != 3 {
		t.Fatalf("team holds %d sessions after the restart (%v), want 3", len(list.GetSessions()), err)
	}
	if _, err := api2.Create(other, &sessionv1.CreateSessionRequest{Namespace: "other", ActorName: "o"}); err != nil {
		t.Fatalf("the other tenant after the restart: %v", err)
	}
}
