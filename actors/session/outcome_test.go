package session_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

// A session actor stopped with a write at the writer answers that write
// OUTCOME_UNKNOWN — it commits after all — and only what it had not
// submitted UNAVAILABLE ("nothing stored").
func TestStoppedActorAnswersItsWriteInFlightOutcomeUnknown(t *testing.T) {
	path := fileURL(t)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()
	store, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	aud, err := writer.Start(sys, store, writer.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		aud.Stop(ctx)
	}()
	svc, err := session.Start(sys, aud, store.Reader(), session.Config{})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan accepted, 64)
	session.OnAccept(svc, func(sid string, queued int, inFlight bool) {
		select {
		case events <- accepted{sid, queued, inFlight}:
		default:
		}
	})
	n := &node{sys: sys, store: store, wr: aud, svc: svc}
	sid := n.create(t, "a")
	for len(events) > 0 {
		<-events // the create's
	}

	ctx := ctxT(t)
	release := holdWrites(t, path)
	first, second := turnWithIDs(sid, ids.New()), turnWithIDs(sid, ids.New())
	inFlight, queued := make(chan error, 1), make(chan error, 1)
	go func() { _, err := svc.Append(ctx, first); inFlight <- err }()
	waitAccepted(t, events, sid, 1, false)
	go func() { _, err := svc.Append(ctx, second); queued <- err }()
	waitAccepted(t, events, sid, 1, true)

	stopped, cancel := context.WithCancel(ctx)
	cancel() // no passivation: the directory is stopped, and its actors with it
	_ = svc.Stop(stopped)
	wantCode(t, <-inFlight, errs.OutcomeUnknownCode)
	wantCode(t, <-queued, errs.UnavailableCode)

	release()
	if err := aud.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := n.messages(t, sid)
	if len(msgs) != 1 || msgs[0].GetMessageId() != first.GetMessages()[0].GetMessageId() {
		t.Fatalf("stored %v; want the write that was in flight, and only it", msgs)
	}
}
