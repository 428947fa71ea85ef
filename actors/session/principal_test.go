package session_test

import (
	"context"
	"testing"

	"github.com/agentstate/agentstate/actors/session"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/asynkron/protoactor-go/actor"
)

// The session_created entry names who asked: the principal of the caller's
// context in-process (embedded when it carries none), and, for a bare
// Proto.Actor request, the principal its header names (a member
// forwarding a request) or remote. The entry's namespace is the session's.
func TestEntriesNameTheRequestsPrincipal(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := context.Background()
	createdBy := func(id string) *auditv1.AuditEntry {
		t.Helper()
		es, err := n.store.Reader().ListAudit(ctx, &auditv1.Filter{SessionId: id, EventType: "session_created"}, "", 10)
		if err != nil || len(es) != 1 {
			t.Fatalf("session_created of %s: %v %v", id, es, err)
		}
		return es[0]
	}
	inProcess := func(c context.Context) string {
		t.Helper()
		r, err := n.svc.Create(c, &sessionv1.CreateSessionRequest{ActorName: "claims-to-be-root", Namespace: "team-a"})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetSession().GetSessionId()
	}
	bare := func(header map[string]string) string {
		t.Helper()
		f := actor.NewFuture(n.sys, time30s)
		env := &actor.MessageEnvelope{Message: &sessionv1.CreateSessionRequest{ActorName: "x", Namespace: "team-a"}, Sender: f.PID()}
		for k, v := range header {
			env.SetHeader(k, v)
		}
		n.sys.Root.Send(n.svc.PID(), env)
		r, err := f.Result()
		if err != nil {
			t.Fatal(err)
		}
		cr, ok := r.(*sessionv1.CreateSessionResponse)
		if !ok {
			t.Fatalf("bare create answered %v", r)
		}
		return cr.GetSession().GetSessionId()
	}
	for _, c := range []struct {
		name, id, want string
	}{
		{"context", inProcess(principal.With(ctx, "alice")), "alice"},
		{"no principal", inProcess(ctx), principal.Embedded},
		{"header", bare(map[string]string{principal.Header: "bob"}), "bob"},
		{"no header", bare(nil), principal.Remote},
	} {
		e := createdBy(c.id)
		if e.GetPrincipal() != c.want || e.GetNamespace() != "team-a" {
			t.Errorf("%s: entry names principal %q namespace %q; want %q, team-a", c.name, e.GetPrincipal(), e.GetNamespace(), c.want)
		}
	}
}
