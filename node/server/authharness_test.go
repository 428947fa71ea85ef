package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/node/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The namespaces of the authorization tests: A is the default namespace;
// B is another tenant's.
const (
	nsA = defaultNamespace
	nsB = "b"
)

// testPrincipal is a principal of the tests' identities file, with the
// roles the issue gives it (the expectations are computed from these, not
// from the authorizer's rules).
type testPrincipal struct {
	name     string
	token    string // "": no credential at all
	operator bool
	roles    map[string]role
}

var matrixPrincipals = []testPrincipal{
	{name: "none"},
	{name: "reader-a", token: "tok-reader-a", roles: map[string]role{nsA: roleReader}},
	{name: "writer-a", token: "tok-writer-a", roles: map[string]role{nsA: roleWriter}},
	{name: "admin-a", token: "tok-admin-a", roles: map[string]role{nsA: roleAdmin}},
	{name: "only-b", token: "tok-only-b", roles: map[string]role{nsB: roleAdmin}},
	{name: "operator", token: "tok-operator", operator: true},
}

// root sets up fixtures and reads the store: every grant.
var rootPrincipal = testPrincipal{name: "root", token: "tok-root", operator: true}

func hashHex(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// writeIdentities writes an identities file holding ps (root included)
// and returns its path.
func writeIdentities(t *testing.T, dir string, ps ...testPrincipal) string {
	t.Helper()
	var f identitiesFile
	for _, p := range ps {
		if p.token == "" {
			continue
		}
		s := principalSpec{Name: p.name, TokenSHA256: []string{hashHex(p.token)}, Operator: p.operator}
		for ns, r := range p.roles {
			s.Grants = append(s.Grants, grantSpec{Namespace: ns, Role: r.String()})
		}
		if p.name == rootPrincipal.name {
			s.Grants = []grantSpec{{Namespace: "*", Role: "admin"}}
		}
		f.Principals = append(f.Principals, s)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "identities.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// authNode is a node with an --auth-file, and a connection to it without
// credentials of its own (each call carries its principal's token).
type authNode struct {
	s    *server
	conn *grpc.ClientConn
	ss   sessionv1.SessionServiceClient
	pl   planv1.PlanServiceClient
	au   auditv1.AuditServiceClient
}

// startAuthNode starts a node with authFile (edit changes its
// configuration) and connects to it in plaintext, or with opt when given.
func startAuthNode(t *testing.T, authFile string, edit func(*Config), opt ...client.Options) *authNode {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Data = "memory:" + t.Name()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", ""
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.AuthFile = authFile
	if edit != nil {
		edit(cfg)
	}
	log, err := NewLogger(io.Discard, "text", "error")
	if err != nil {
		t.Fatal(err)
	}
	s, err := startServer(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.shutdown(cfg.ShutdownTimeout); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	conn, err := client.Dial(s.grpcAddr, append(opt, client.Options{})[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &authNode{s: s, conn: conn, ss: sessionv1.NewSessionServiceClient(conn),
		pl: planv1.NewPlanServiceClient(conn), au: auditv1.NewAuditServiceClient(conn)}
}

// as is ctx carrying p's token.
func as(ctx context.Context, p testPrincipal) context.Context {
	if p.token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.token)
}

// fixture is what each namespace holds for a case to act on: a session
// with two messages, a state, a shared scope and a snapshot; a plan with an
// error; the session's first audit entry.
type fixture struct {
	session, plan, scope, auditID string
	ns                            string
	// export is the session's export, chunks its ExportStream: what the
	// import cases import.
	export string
	chunks []*sessionv1.ExportChunk
}

// newFixtures are the fixtures of A and B. Their plans have one plan id,
// which names two plans, one in each namespace.
func (n *authNode) newFixtures(ctx context.Context, t *testing.T) (a, b *fixture) {
	t.Helper()
	plan := ids.New()
	return n.newFixture(ctx, t, nsA, plan), n.newFixture(ctx, t, nsB, plan)
}

func (n *authNode) newFixture(ctx context.Context, t *testing.T, ns, plan string) *fixture {
	t.Helper()
	ctx = as(ctx, rootPrincipal)
	f := &fixture{ns: ns, plan: plan, scope: "app:" + ns}
	cr, err := n.ss.Create(ctx, &sessionv1.CreateSessionRequest{Namespace: ns, ActorName: "fixture",
		StateDelta:  &sessionv1.StateDelta{SetJson: map[string]string{"k": "1"}},
		ScopeDeltas: []*sessionv1.ScopeDelta{{Scope: f.scope, Delta: &sessionv1.StateDelta{SetJson: map[string]string{"x": "1"}}}}})
	if err != nil {
		t.Fatalf("fixture create: %v", err)
	}
	f.session = cr.GetSession().GetSessionId()
	if _, err := n.ss.Append(ctx, &sessionv1.AppendRequest{SessionId: f.session, Messages: []*sessionv1.NewMessage{
		{Role: sessionv1.Role_ROLE_USER, Content: "one"}, {Role: sessionv1.Role_ROLE_ASSISTANT, Content: "two", ItemKey: "item", Kind: "k"}}}); err != nil {
		t.Fatalf("fixture append: %v", err)
	}
	if _, err := n.ss.PutSnapshot(ctx, &sessionv1.PutSnapshotRequest{SessionId: f.session, Sequence: 0, Data: []byte("snap")}); err != nil {
		t.Fatalf("fixture snapshot: %v", err)
	}
	if _, err := n.pl.RecordError(ctx, &planv1.RecordErrorRequest{Namespace: ns, PlanId: f.plan, Phase: planv1.Phase_PHASE_EXECUTE, StepId: "s", ErrorType: "TimeoutError", Message: "slow"}); err != nil {
		t.Fatalf("fixture plan: %v", err)
	}
	l, err := n.au.List(ctx, &auditv1.ListRequest{Filter: &auditv1.Filter{SessionId: f.session}, Limit: 1})
	if err != nil || len(l.GetEntries()) == 0 {
		t.Fatalf("fixture audit entry: %v %v", l, err)
	}
	f.auditID = l.GetEntries()[0].GetEventId()
	ex, err := n.ss.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: f.session})
	if err != nil {
		t.Fatalf("fixture export: %v", err)
	}
	f.export = ex.GetData()
	st, err := n.ss.ExportStream(ctx, &sessionv1.ExportSessionRequest{SessionId: f.session})
	if err != nil {
		t.Fatalf("fixture export stream: %v", err)
	}
	for {
		c, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("fixture export stream: %v", err)
		}
		f.chunks = append(f.chunks, c)
	}
	return f
}

// fingerprint is everything of the fixtures a refused request could have
// changed, read by root: compared before and after each refusal.
func (n *authNode) fingerprint(ctx context.Context, t *testing.T, fs ...*fixture) string {
	t.Helper()
	ctx = as(ctx, rootPrincipal)
	var out []byte
	add := func(m proto.Message, err error) {
		if err != nil {
			out = append(out, []byte(fmt.Sprintf("error %v;", err))...)
			return
		}
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		out = append(out, b...)
		out = append(out, ';')
	}
	for _, f := range fs {
		add(n.ss.Get(ctx, &sessionv1.GetSessionRequest{SessionId: f.session}))
		add(n.ss.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: f.session}))
		add(n.ss.GetState(ctx, &sessionv1.GetStateRequest{SessionId: f.session, Scopes: []string{f.scope}}))
		add(n.ss.GetSnapshot(ctx, &sessionv1.GetSnapshotRequest{SessionId: f.session}))
		add(n.ss.GetItem(ctx, &sessionv1.GetItemRequest{SessionId: f.session, ItemKey: "item"}))
		add(n.ss.ListItems(ctx, &sessionv1.ListItemsRequest{SessionId: f.session, Kind: "k"}))
		add(n.pl.History(ctx, &planv1.HistoryRequest{Namespace: f.ns, PlanId: f.plan}))
		add(n.pl.ErrorDetails(ctx, &planv1.ErrorDetailsRequest{Namespace: f.ns, PlanId: f.plan}))
		add(n.au.Get(ctx, &auditv1.GetRequest{EventId: f.auditID}))
	}
	return string(out)
}

// auditSince returns the entries committed after cursor other than
// auth_failure ones (a refusal of a credential is recorded by design), and
// the new cursor.
// A cursor pruned away (a served Prune) starts over from the first entry
// left when restart is set.
func (n *authNode) auditSince(ctx context.Context, t *testing.T, cursor string, restart bool) ([]*auditv1.AuditEntry, string) {
	t.Helper()
	ctx = as(ctx, rootPrincipal)
	var kept []*auditv1.AuditEntry
	for {
		l, err := n.au.List(ctx, &auditv1.ListRequest{AfterEventId: cursor, Limit: 1000})
		if status.Code(err) == codes.NotFound && restart && cursor != "" {
			cursor = ""
			continue
		}
		if err != nil {
			t.Fatalf("audit list after %q: %v", cursor, err)
		}
		for _, e := range l.GetEntries() {
			if e.GetEventType() != "auth_failure" {
				kept = append(kept, e)
			}
			cursor = e.GetEventId()
		}
		if l.GetNextCursor() == "" {
			return kept, cursor
		}
	}
}
