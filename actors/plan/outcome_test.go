package plan_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/messages/errs"
)

// A caller that stops waiting while its write is at the writer must not
// hear UNAVAILABLE ("nothing stored, retry"): the write commits after all.
func TestRecordErrorWhoseCallerGaveUpIsOutcomeUnknown(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	entered, release := h.gate.armHold()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.svc.RecordError(ctx, timeoutOn("p", execute, "s"))
		done <- err
	}()
	<-entered // the write is in the writer's transaction
	cancel()
	err := <-done
	release()
	if !errors.Is(err, errs.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want OUTCOME_UNKNOWN: the write was at the writer", err)
	}
	// It did commit: the next record of the step counts it.
	resp, err := h.svc.RecordError(context.Background(), timeoutOn("p", execute, "s"))
	if err != nil {
		t.Fatal(err)
	}
	if seq := resp.GetRecord().GetSequence(); seq != 1 {
		t.Fatalf("next record has sequence %d, want 1 (the abandoned one was stored)", seq)
	}
}
