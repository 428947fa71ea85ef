package server

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The embedded API decides a call carrying a principal exactly as the
// gRPC API decides that principal's request; a call without one is the
// program's own and is trusted.
func TestEmbeddedAPIDecidesTheContextsPrincipal(t *testing.T) {
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "embedded.db"))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	node, err := actors.Start(sys, store, actors.Config{Writer: writer.Config{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
		defer scancel()
		if err := node.Stop(sctx); err != nil {
			t.Error(err)
		}
		store.Close()
	})
	api := Guard(node, store.Reader())
	writerA, err := NewPrincipal("writer-a", false, "a:writer")
	if err != nil {
		t.Fatal(err)
	}
	readerA, err := NewPrincipal("reader-a", false, "a:reader")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPrincipal("x", false, "a:owner"); err == nil {
		t.Fatal("a grant of an unknown role was accepted")
	}
	create := func(ns string) string {
		cr, err := api.Sessions.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "embedded", Namespace: ns})
		if err != nil {
			t.Fatalf("the program's own create in %s: %v", ns, err)
		}
		return cr.GetSession().GetSessionId()
	}
	inA, inB := create("a"), create("b")
	as := func(p *Principal) context.Context { return WithPrincipal(ctx, p) }
	app := func(c context.Context, id string) error {
		_, err := api.Sessions.Append(c, &sessionv1.AppendRequest{SessionId: id,
			Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "x"}}})
		return err
	}
	for _, c := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"writer appends in a", func() error { return app(as(writerA), inA) }, codes.OK},
		{"writer appends in b", func() error { return app(as(writerA), inB) }, codes.NotFound},
		{"reader appends in a", func() error { return app(as(readerA), inA) }, codes.PermissionDenied},
		{"writer deletes in a", func() error {
			_, err := api.Sessions.Delete(as(writerA), &sessionv1.DeleteSessionRequest{SessionId: inA})
			return err
		}, codes.PermissionDenied},
		{"writer creates in b", func() error {
			_, err := api.Sessions.Create(as(writerA), &sessionv1.CreateSessionRequest{ActorName: "x", Namespace: "b"})
			return err
		}, codes.PermissionDenied},
		{"reader reads b's messages", func() error {
			_, err := api.Sessions.ListMessages(as(readerA), &sessionv1.ListMessagesRequest{SessionId: inB})
			return err
		}, codes.NotFound},
		{"writer verifies the audit chain", func() error {
			_, err := api.Audit.Verify(as(writerA), &auditv1.VerifyRequest{})
			return err
		}, codes.PermissionDenied},
		{"writer reads a plan of local", func() error {
			_, err := api.Plans.History(as(writerA), &planv1.HistoryRequest{PlanId: ids.New()})
			return err
		}, codes.NotFound},
		{"writer records on a plan of a", func() error {
			_, err := api.Plans.RecordError(as(writerA), &planv1.RecordErrorRequest{Namespace: "a", PlanId: "p",
				Phase: planv1.Phase_PHASE_EXECUTE, StepId: "s", ErrorType: "TimeoutError"})
			return err
		}, codes.OK},
		{"reader records on a plan of a", func() error {
			_, err := api.Plans.RecordSuccess(as(readerA), &planv1.RecordSuccessRequest{Namespace: "a", PlanId: "p",
				Phase: planv1.Phase_PHASE_EXECUTE, StepId: "s"})
			return err
		}, codes.PermissionDenied},
		{"writer records on the same plan id in b", func() error {
			_, err := api.Plans.SetPolicy(as(writerA), &planv1.SetPolicyRequest{Namespace: "b", PlanId: "p", MaxRetries: 1})
			return err
		}, codes.NotFound},
		{"the program appends in b", func() error { return app(ctx, inB) }, codes.OK},
		{"the program verifies the audit chain", func() error {
			_, err := api.Audit.Verify(ctx, &auditv1.VerifyRequest{})
			return err
		}, codes.OK},
	} {
		if err := c.call(); status.Code(err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	ls, err := api.Sessions.List(as(readerA), &sessionv1.ListSessionsRequest{})
	if err != nil || len(ls.GetSessions()) != 1 || ls.GetSessions()[0].GetSessionId() != inA {
		t.Fatalf("reader-a lists %v (%v), want only the session of a", ls.GetSessions(), err)
	}
	for id, want := range map[string]int{inA: 1, inB: 1} {
		m, err := api.Sessions.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: id})
		if err != nil || len(m.GetMessages()) != want {
			t.Errorf("session %s holds %d messages (%v), want %d: refused calls store nothing", id, len(m.GetMessages()), err, want)
		}
	}
}
