package server

import (
	"context"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
)

// Every entry a request through gRPC causes — the node's own (create,
// append, close, plan record) and the caller's (Record) — names the
// principal the request authenticated as, whatever actor_name and
// user_identity the caller claims, and the namespace it belongs to; the
// principal filter finds exactly them, and the trail verifies.
func TestAuditEntriesNameTheAuthenticatedPrincipal(t *testing.T) {
	writerA := testPrincipal{name: "writer-a", token: "tok-writer-a", roles: map[string]role{nsA: roleWriter}}
	adminB := testPrincipal{name: "admin-b", token: "tok-admin-b", roles: map[string]role{nsB: roleAdmin}}
	n := startAuthNode(t, writeIdentities(t, t.TempDir(), rootPrincipal, writerA, adminB), nil)
	ctx := context.Background()

	write := func(p testPrincipal, ns string) string {
		t.Helper()
		c := as(ctx, p)
		cr, err := n.ss.Create(c, &sessionv1.CreateSessionRequest{Namespace: ns, ActorName: "root"})
		if err != nil {
			t.Fatalf("%s create: %v", p.name, err)
		}
		id := cr.GetSession().GetSessionId()
		if _, err := n.ss.Append(c, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_USER, Content: "hi"}}}); err != nil {
			t.Fatalf("%s append: %v", p.name, err)
		}
		if _, err := n.ss.Close(c, &sessionv1.CloseSessionRequest{SessionId: id}); err != nil {
			t.Fatalf("%s close: %v", p.name, err)
		}
		if _, err := n.au.Record(c, &auditv1.RecordRequest{EventType: "resource_modified", SessionId: id,
			ActorName: "root", UserIdentity: "root", Sync: true}); err != nil {
			t.Fatalf("%s record: %v", p.name, err)
		}
		return id
	}
	sa := write(writerA, nsA)
	sb := write(adminB, nsB)
	nsOf := map[string]string{writerA.name: nsA, adminB.name: nsB}
	// One plan id, two plans: each one's entries belong to its namespace.
	plan := ids.New()
	for _, p := range []testPrincipal{writerA, adminB} {
		if _, err := n.pl.RecordError(as(ctx, p), &planv1.RecordErrorRequest{Namespace: nsOf[p.name], PlanId: plan,
			Phase: planv1.Phase_PHASE_EXECUTE, StepId: "s", ErrorType: "TimeoutError", Message: "slow"}); err != nil {
			t.Fatalf("%s's plan record: %v", p.name, err)
		}
	}

	byPrincipal := func(name string) []*auditv1.AuditEntry {
		t.Helper()
		l, err := n.au.List(as(ctx, rootPrincipal), &auditv1.ListRequest{Filter: &auditv1.Filter{Principal: name}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return l.GetEntries()
	}
	want := map[string]map[string]bool{
		writerA.name: {"session_created": true, "session_closed": true, "resource_modified": true, "plan_error_recorded": true},
		adminB.name:  {"session_created": true, "session_closed": true, "resource_modified": true, "plan_error_recorded": true},
	}
	sessionOf := map[string]string{writerA.name: sa, adminB.name: sb}
	for name, types := range want {
		got := byPrincipal(name)
		seen := map[string]bool{}
		for _, e := range got {
			seen[e.GetEventType()] = true
			if e.GetPrincipal() != name {
				t.Errorf("filter principal=%s returned an entry of %q", name, e.GetPrincipal())
			}
			if e.GetSessionId() != "" && (e.GetSessionId() != sessionOf[name] || e.GetNamespace() != nsOf[name]) {
				t.Errorf("%s's entry %s: session %s namespace %q, want %s %q", name, e.GetEventType(), e.GetSessionId(), e.GetNamespace(), sessionOf[name], nsOf[name])
			}
			if e.GetPlanId() != "" && (e.GetPlanId() != plan || e.GetNamespace() != nsOf[name]) {
				t.Errorf("%s's plan entry: plan %s namespace %q, want %s %q", name, e.GetPlanId(), e.GetNamespace(), plan, nsOf[name])
			}
		}
		for ty := range types {
			if !seen[ty] {
				t.Errorf("no %s entry names principal %s (got %v)", ty, name, got)
			}
		}
	}
	// No entry names the principal the callers claimed as their actor.
	if got := byPrincipal(rootPrincipal.name); len(got) != 0 {
		t.Errorf("%d entries name root, which sent nothing: %v", len(got), got)
	}
	if v, err := n.au.Verify(as(ctx, rootPrincipal), &auditv1.VerifyRequest{}); err != nil || !v.GetOk() {
		t.Fatalf("verify: %v %v", v, err)
	}
}

// The audit trail's own principal names cannot be configured, given to an
// embedded call, or claimed by a JWT (which names principals the same way).
func TestReservedPrincipalNamesAreRefused(t *testing.T) {
	for _, name := range []string{"node", "embedded", "anonymous", "remote"} {
		if _, err := NewPrincipal(name, false, "a:reader"); err == nil {
			t.Errorf("NewPrincipal(%q) accepted a reserved name", name)
		}
		doc := `{"principals":[{"name":"` + name + `","token_sha256":["` + hashHex("t") + `"],"grants":[{"namespace":"a","role":"reader"}]}]}`
		if _, err := parseIdentities([]byte(doc)); err == nil {
			t.Errorf("an identities file naming %q was accepted", name)
		}
	}
}
