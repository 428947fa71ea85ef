package actors_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
}

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	store, err := sqlite.Open("memory:" + strings.ReplaceAll(t.Name(), "/", "-"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func quietConfig() actors.Config {
	return actors.Config{Writer: writer.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
}

// TestStopDrainsEveryAcceptedWrite writes through all three services,
// including an async audit record that is only accepted (not committed)
// when Record returns, and checks after Stop that the store has it all.
func TestStopDrainsEveryAcceptedWrite(t *testing.T) {
	store := openStore(t)
	sys := quietSystem()
	defer sys.Shutdown()
	node, err := actors.Start(sys, store, quietConfig())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	ctx := context.Background()

	cr, err := node.Sessions().Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "alice"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	sid := cr.GetSession().GetSessionId()
	ar, err := node.Sessions().Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{
		{Role: sessionv1.Role_ROLE_USER, Content: "hi"}, {Role: sessionv1.Role_ROLE_ASSISTANT, Content: "hello"},
	}})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if got := len(ar.GetMessages()); got != 2 || ar.GetMessages()[1].GetSequence() != 1 {
		t.Fatalf("Append answered %v, want sequences 0 and 1", ar.GetMessages())
	}
	planID := "01JDQ6Z1V3T9Q2B8W4X5Y6Z7A8"
	if _, err := node.Plans().RecordError(ctx, &planv1.RecordErrorRequest{
		PlanId: planID, Phase: planv1.Phase_PHASE_EXECUTE, StepId: "s1", ErrorType: "TimeoutError", Message: "slow",
	}); err != nil {
		t.Fatalf("RecordError: %v", err)
	}
	rr, err := node.Audit().Record(ctx, &auditv1.RecordRequest{EventType: audit.EventConfigChanged, DetailsJson: `{"n":1}`})
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	if sessions, plans := node.Sessions().ActiveActors(), node.Plans().ActiveActors(); sessions < 1 || plans < 1 {
		t.Fatalf("active actors: sessions %d, plans %d; want at least one each", sessions, plans)
	}

	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := node.Stop(stopCtx); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	r := store.Reader()
	msgs, err := r.ListMessages(ctx, sid, 0, 10)
	if err != nil || len(msgs) != 2 || msgs[0].GetContent() != "hi" || msgs[1].GetContent() != "hello" {
		t.Fatalf("stored messages = %v, %v; want hi, hello", msgs, err)
	}
	hist, err := r.PlanHistory(ctx, persistenceFilter(planID))
	if err != nil || len(hist) != 1 || hist[0].GetErrorType() != "TimeoutError" {
		t.Fatalf("stored plan history = %v, %v; want one TimeoutError", hist, err)
	}
	e, err := r.GetAudit(ctx, rr.GetEntry().GetEventId())
	if err != nil || e.GetEventType() != audit.EventConfigChanged || e.GetHash() == "" {
		t.Fatalf("async audit entry after Stop = %v, %v; want it committed with a hash", e, err)
	}

	// The writer was released: the store hands it out again.
	w, err := store.Writer()
	if err != nil {
		t.Fatalf("Writer after Stop: %v (the writer actor kept it)", err)
	}
	w.Release()

	// After Stop every service refuses work instead of hanging.
	_, err = node.Sessions().Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{
		{Role: sessionv1.Role_ROLE_USER, Content: "late"}}})
	if !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("Append after Stop: %v, want UNAVAILABLE", err)
	}
}

// TestStopTwiceConcurrently: every call waits for the one drain and gets
// its result; nothing panics (the services' own stops are not re-entered).
func TestStopTwiceConcurrently(t *testing.T) {
	store := openStore(t)
	sys := quietSystem()
	defer sys.Shutdown()
	node, err := actors.Start(sys, store, quietConfig())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var wg sync.WaitGroup
	results := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = node.Stop(context.Background())
		}()
	}
	wg.Wait()
	for i, err := range results {
		if err != nil {
			t.Errorf("Stop #%d: %v", i, err)
		}
	}
	if err := node.Stop(context.Background()); err != nil {
		t.Errorf("Stop after Stop: %v", err)
	}
}

// TestStartFailureLeavesNothingRunning makes the sessions service fail to
// start (its name is taken) after the writer has started: Start must
// stop the writer again, so the store's writer is free.
func TestStartFailureLeavesNothingRunning(t *testing.T) {
	store := openStore(t)
	sys := quietSystem()
	defer sys.Shutdown()
	if _, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}), "sessions"); err != nil {
		t.Fatalf("spawn squatter: %v", err)
	}
	node, err := actors.Start(sys, store, quietConfig())
	if err == nil {
		node.Stop(context.Background())
		t.Fatal("Start succeeded although the name \"sessions\" is taken")
	}
	w, err := store.Writer()
	if err != nil {
		t.Fatalf("Writer after failed Start: %v (the writer was left running)", err)
	}
	w.Release()
}

func TestStartRejectsNil(t *testing.T) {
	if _, err := actors.Start(nil, nil, actors.Config{}); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Fatalf("Start(nil, nil) = %v, want INVALID_ARGUMENT", err)
	}
}
