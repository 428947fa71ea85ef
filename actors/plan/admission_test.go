package plan_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/messages/errs"
)

// A record whose caller stopped waiting still holds its backlog room until
// the owner answers it: the backlog bounds the work in flight, not the
// callers waiting. Here the backlog has one slot; the caller's record is
// at the writer when its context ends, so a network caller after it is
// refused, and an in-process one waits until the abandoned record is
// answered.
func TestAbandonedRecordHoldsItsBacklogSlotUntilAnswered(t *testing.T) {
	h := newHarnessWith(t, inMemory, plan.Config{}, writer.Config{Backlog: 1}, nil)
	backlog := h.wr.Backlog()
	entered, hold := h.gate.armHold()
	var once sync.Once
	release := func() { once.Do(hold) }
	t.Cleanup(release) // a failing test lets the writer go before the harness stops
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.svc.RecordError(ctx, timeoutOn("p", execute, "s"))
		done <- err
	}()
	<-entered // the record is in the writer's transaction, unanswered
	cancel()
	if err := <-done; !errors.Is(err, errs.ErrOutcomeUnknown) {
		t.Fatalf("abandoned record: %v, want OUTCOME_UNKNOWN", err)
	}
	if p := backlog.Pending(); p != 1 {
		t.Fatalf("%d backlog slots taken after the caller gave up; want 1: its record is still at the writer", p)
	}
	if _, err := h.svc.RecordError(writer.NoWait(ctxT(t)), timeoutOn("p", execute, "s")); !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("network record while the abandoned one is in flight: %v, want RESOURCE_EXHAUSTED", err)
	}

	// An in-process caller waits for the slot; it gets it once the
	// abandoned record is answered, which it was: it is sequence 0.
	waiting := make(chan error, 1)
	var seq int64 = -1
	go func() {
		resp, err := h.svc.RecordError(ctxT(t), timeoutOn("p", execute, "s"))
		seq = resp.GetRecord().GetSequence()
		waiting <- err
	}()
	release()
	if err := <-waiting; err != nil {
		t.Fatalf("in-process record after the abandoned one: %v", err)
	}
	if seq != 1 {
		t.Fatalf("next record has sequence %d, want 1 (the abandoned one was stored)", seq)
	}
	if p, b := backlog.Pending(), backlog.PendingBytes(); p != 0 || b != 0 {
		t.Fatalf("after every record was answered: %d slots, %d bytes pending", p, b)
	}
}
