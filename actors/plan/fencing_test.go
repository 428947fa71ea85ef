package plan_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/lifecycle/lifecycletest"
	"github.com/agentstate/agentstate/actors/plan"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// secondService starts another plans service on h's actor system, audit
// actor and store: a second directory, which owns plans independently of
// h.svc, as another cluster member would.
func secondService(tb testing.TB, h *harness) *plan.Service {
	tb.Helper()
	svc, err := plan.Start(h.sys, h.wr, h.store.Reader(), plan.Config{Name: "plans-b"})
	if err != nil {
		tb.Fatalf("second plan.Start: %v", err)
	}
	// Registered after h's cleanups, so it runs first: before the audit
	// actor stops.
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			tb.Errorf("second plans Stop: %v", err)
		}
	})
	return svc
}

// TestFencingDoubleActivation activates one plan in two directories in
// turn: each activation fences the other's actor, whose next write fails
// UNAVAILABLE and stores nothing; the actor stops, and the retry lands on
// the current owner, which loaded everything committed before it.
func TestFencingDoubleActivation(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	a, b := h.svc, secondService(t, h)
	ctx := ctxT(t)
	const id = "fenced-plan"

	check := func(r *planv1.ErrorRecord, seq int64, retries int32) {
		t.Helper()
		if r.GetSequence() != seq || r.GetRetryCount() != retries {
			t.Fatalf("record %v: want sequence %d, retry_count %d", r, seq, retries)
		}
	}
	r0 := record(t, a, timeoutOn(id, execute, "s")) // a's actor: epoch 1
	check(r0, 0, 1)
	// b's actor activates (epoch 2) and loads a's record and counter.
	r1 := record(t, b, timeoutOn(id, execute, "s"))
	check(r1, 1, 2)

	_, err := a.RecordError(ctx, timeoutOn(id, execute, "s"))
	lifecycletest.WantFenced(t, err)
	if err := plan.WaitNoActors(ctx, a); err != nil {
		t.Fatalf("the fenced actor did not stop: %v", err)
	}
	if got := len(history(t, a, id)); got != 2 {
		t.Fatalf("%d records after the fenced write, want 2", got)
	}

	// The retry through a activates a fresh actor (epoch 3), fencing b's.
	r2 := record(t, a, timeoutOn(id, execute, "s"))
	check(r2, 2, 3)
	_, err = b.SetPolicy(ctx, &planv1.SetPolicyRequest{PlanId: id, MaxRetries: 9})
	lifecycletest.WantFenced(t, err)
	if err := plan.WaitNoActors(ctx, b); err != nil {
		t.Fatalf("the fenced actor did not stop: %v", err)
	}
	if _, err := b.SetPolicy(ctx, &planv1.SetPolicyRequest{PlanId: id, MaxRetries: 9}); err != nil {
		t.Fatalf("SetPolicy retried through b: %v", err)
	}
	_, err = a.RecordSuccess(ctx, &planv1.RecordSuccessRequest{PlanId: id, Phase: execute, StepId: "s"})
	lifecycletest.WantFenced(t, err)
	if err := plan.WaitNoActors(ctx, a); err != nil {
		t.Fatal(err)
	}
	rs, err := a.RecordSuccess(ctx, &planv1.RecordSuccessRequest{PlanId: id, Phase: execute, StepId: "s"})
	if err != nil || rs.GetPreviousRetryCount() != 3 {
		t.Fatalf("RecordSuccess retried through a: %v %v, want previous count 3", rs, err)
	}
	// The policy b set, and the reset a made, are what the next owner sees.
	r3 := record(t, a, timeoutOn(id, execute, "s"))
	check(r3, 3, 1)
	if r3.GetMaxRetries() != 9 {
		t.Fatalf("record after the policy change: max_retries %d, want 9", r3.GetMaxRetries())
	}

	if fa, fb := a.FencedActivations(), b.FencedActivations(); fa != 2 || fb != 1 {
		t.Fatalf("fenced activations counted: %d through a, %d through b; want 2 and 1", fa, fb)
	}

	got := history(t, b, id)
	want := []*planv1.ErrorRecord{r0, r1, r2, r3}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if r.GetSequence() != int64(i) || r.GetRecordId() != want[i].GetRecordId() {
			t.Fatalf("record %d: %s at %d, want %s", i, r.GetRecordId(), r.GetSequence(), want[i].GetRecordId())
		}
	}
}

// TestFencingConcurrentRecords records errors of one plan through two
// directories: 64 senders, alternating services, each retrying a fenced
// request through the other service. The history is then exactly the
// acknowledged records: dense, each at its acknowledged sequence, none
// twice, nothing unacknowledged.
func TestFencingConcurrentRecords(t *testing.T) {
	const (
		senders = 64
		each    = 8
		retries = 500
		id      = "contended-plan"
	)
	h := newHarness(t, inMemory, plan.Config{})
	svcs := [2]*plan.Service{h.svc, secondService(t, h)}
	ctx := ctxT(t)
	// a's actor is fenced by b's from the start, so at least one write
	// below is refused.
	record(t, svcs[0], timeoutOn(id, execute, "first"))
	record(t, svcs[1], timeoutOn(id, execute, "first"))

	acks := make([][]lifecycletest.Ack, senders)
	var fencedN atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, senders)
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				req := timeoutOn(id, execute, fmt.Sprintf("step-%d", g))
				var (
					r   *planv1.RecordErrorResponse
					err error
				)
				for try := 0; ; try++ {
					r, err = svcs[(g+try)%2].RecordError(ctx, req)
					if !lifecycletest.IsFenced(err) {
						break
					}
					fencedN.Add(1)
					if try == retries {
						errc <- fmt.Errorf("sender %d record %d: still fenced after %d tries", g, i, try)
						return
					}
				}
				if err != nil {
					errc <- fmt.Errorf("sender %d record %d: %w", g, i, err)
					return
				}
				// Each sender has its own step, so its retry counts
				// rise by one per acknowledged record: a lost or
				// doubled record would show here too.
				if got := r.GetRecord().GetRetryCount(); got != int32(i+1) {
					errc <- fmt.Errorf("sender %d record %d: retry_count %d, want %d", g, i, got, i+1)
					return
				}
				acks[g] = append(acks[g], lifecycletest.Ack{ID: r.GetRecord().GetRecordId(), Seq: r.GetRecord().GetSequence()})
			}
		}(g)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	got := history(t, svcs[0], id)
	if want := 2 + senders*each; len(got) != want {
		t.Fatalf("%d records stored, want %d", len(got), want)
	}
	at := make(map[string]int64, len(got))
	for i, r := range got {
		if r.GetSequence() != int64(i) {
			t.Fatalf("record %d has sequence %d", i, r.GetSequence())
		}
		if _, dup := at[r.GetRecordId()]; dup {
			t.Fatalf("record %s stored twice", r.GetRecordId())
		}
		at[r.GetRecordId()] = r.GetSequence()
	}
	lifecycletest.WantAcksStored(t, "record", at, acks, fencedN.Load())
	t.Logf("%d records, %d fenced attempts", senders*each, fencedN.Load())
}

// TestActivationFailure: when the store cannot take the epoch, the calls
// waiting for it fail with the store's error and nothing is decided; the
// next call activates a fresh actor.
func TestActivationFailure(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	h.gate.failNext(errs.ResourceExhausted("injected: disk full"), nil)
	_, err := h.svc.RecordError(ctx, timeoutOn("p", execute, "s"))
	if errs.CodeOf(err) != errs.ResourceExhaustedCode {
		t.Fatalf("record during a failed activation: %v, want RESOURCE_EXHAUSTED", err)
	}
	if err := plan.WaitNoActors(ctx, h.svc); err != nil {
		t.Fatalf("the actor that failed to activate did not stop: %v", err)
	}
	if r := record(t, h.svc, timeoutOn("p", execute, "s")); r.GetSequence() != 0 || r.GetRetryCount() != 1 {
		t.Fatalf("first record after the failed activation: %v", r)
	}
}
