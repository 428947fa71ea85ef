package plan_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// A full disk (the database pinned at its size) fails exactly the records
// whose transaction it rolled back; nothing of them is stored, and once
// space is back the next record gets the next dense sequence and counts.
func TestDiskFullFailsCarriedRecords(t *testing.T) {
	h := newHarness(t, onDisk, plan.Config{})
	ctx := ctxT(t)
	for i := 0; i < 3; i++ {
		record(t, h.svc, timeoutOn("p", execute, "s"))
	}
	pages, err := h.store.PageCount()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.SetMaxPageCount(pages); err != nil {
		t.Fatal(err)
	}

	// Large records cannot fit in the pinned database; several at once, so
	// some wait behind the failing write and are recomputed after it.
	const n = 8
	big := strings.Repeat("stack frame\n", 5000)
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := timeoutOn("p", execute, "s")
			req.StackSummary = big
			_, err := h.svc.RecordError(ctx, req)
			errc <- err
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if !errors.Is(err, errs.ErrResourceExhausted) {
			t.Fatalf("record on a full disk: %v; want RESOURCE_EXHAUSTED", err)
		}
	}

	if err := h.store.SetMaxPageCount(1 << 30); err != nil {
		t.Fatal(err)
	}
	r := record(t, h.svc, timeoutOn("p", execute, "s"))
	if r.GetSequence() != 3 || r.GetRetryCount() != 4 || r.GetRecoveryAction() != escalate {
		t.Fatalf("after the fault: sequence %d retry_count %d %v; want 3, 4, escalate", r.GetSequence(), r.GetRetryCount(), r.GetRecoveryAction())
	}
	recs := history(t, h.svc, "p")
	if len(recs) != 4 {
		t.Fatalf("history has %d records; want the 4 acknowledged", len(recs))
	}
	for i, rec := range recs {
		if rec.GetSequence() != int64(i) || rec.GetStackSummary() == big {
			t.Fatalf("history[%d] = seq %d (stack %d bytes)", i, rec.GetSequence(), len(rec.GetStackSummary()))
		}
	}
	cnt, err := h.store.Reader().CountAudit(ctx, &auditv1.Filter{EventType: audit.EventPlanErrorRecorded, PlanId: "p"})
	if err != nil || cnt != 4 {
		t.Fatalf("plan_error_recorded entries: %d, %v; want 4", cnt, err)
	}
}

// Requests queued behind a write that then fails were given provisional
// sequences; they are recomputed from the last committed state, so they
// commit with the sequences and counts the failed write gave back.
func TestFailedWriteRecomputesQueuedRequests(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	record(t, h.svc, timeoutOn("p", execute, "s"))
	record(t, h.svc, timeoutOn("p", execute, "s"))

	w := queueTwoBehindAHeldWrite(t, h, ctx, func() {
		h.gate.failNext(errs.ResourceExhausted("injected: disk full"), nil)
	})
	if err := <-w.a; !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("A: %v; want the injected RESOURCE_EXHAUSTED", err)
	}
	w.expectQueued(t, 2)
	recs := history(t, h.svc, "p")
	if len(recs) != 4 || recs[3].GetSequence() != 3 || recs[3].GetRetryCount() != 4 {
		t.Fatalf("history: %v", recs)
	}
}

// A command-level FAILED_PRECONDITION means the store disagrees with the
// actor (a sequence is taken): the actor reloads and goes on densely.
func TestSequenceConflictReloads(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	record(t, h.svc, timeoutOn("p", execute, "s"))
	h.gate.failNext(nil, errs.FailedPrecondition("injected: sequence 1 is taken"))
	if _, err := h.svc.RecordError(ctx, timeoutOn("p", execute, "s")); !errors.Is(err, errs.ErrFailedPrecondition) {
		t.Fatalf("conflicting write: %v; want FAILED_PRECONDITION", err)
	}
	r := record(t, h.svc, timeoutOn("p", execute, "s"))
	if r.GetSequence() != 1 || r.GetRetryCount() != 2 {
		t.Fatalf("after reload: sequence %d retry_count %d; want 1 2", r.GetSequence(), r.GetRetryCount())
	}
}

// failingReader fails GetPlan while failing is set.
type failingReader struct {
	persistence.Reader
	failing atomic.Bool
}

func (f *failingReader) GetPlan(ctx context.Context, ns, planID string) (*persistence.PlanState, error) {
	if f.failing.Load() {
		return nil, errs.Unavailable("injected: database unreadable")
	}
	return f.Reader.GetPlan(ctx, ns, planID)
}

// A plan whose state cannot be loaded decides nothing: its requests fail
// UNAVAILABLE, the actor asks to be passivated, and once the store reads
// again a new actor loads the plan and goes on densely.
func TestUnloadablePlanRefusesThenRecovers(t *testing.T) {
	fr := &failingReader{}
	h := newHarnessWith(t, inMemory, plan.Config{}, writer.Config{}, func(r persistence.Reader) persistence.Reader {
		fr.Reader = r
		return fr
	})
	record(t, h.svc, timeoutOn("p", execute, "s"))
	h.svc.PassivateAll()

	fr.failing.Store(true)
	if _, err := h.svc.RecordError(ctxT(t), timeoutOn("p", execute, "s")); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("RecordError on an unloadable plan: %v; want UNAVAILABLE", err)
	}
	if err := plan.WaitNoActors(ctxT(t), h.svc); err != nil {
		t.Fatalf("the broken plan actor was not passivated: %v", err)
	}
	fr.failing.Store(false)
	if r := record(t, h.svc, timeoutOn("p", execute, "s")); r.GetSequence() != 1 || r.GetRetryCount() != 2 {
		t.Fatalf("after recovery: sequence %d retry_count %d; want 1 2", r.GetSequence(), r.GetRetryCount())
	}
}

// A write answered OUTCOME_UNKNOWN may have committed (here it did): the
// actor reloads instead of rolling back, so the requests queued behind it
// are recomputed from what the store holds and commit at once, densely
// after the write, counting its record; none fails FAILED_PRECONDITION.
func TestOutcomeUnknownWriteReloads(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	record(t, h.svc, timeoutOn("p", execute, "s"))
	record(t, h.svc, timeoutOn("p", execute, "s"))

	w := queueTwoBehindAHeldWrite(t, h, ctx, func() {
		h.gate.commitThenFailNext(errs.OutcomeUnknown("injected: the answer of COMMIT was lost"))
	})
	if err := <-w.a; !errors.Is(err, errs.ErrOutcomeUnknown) {
		t.Fatalf("A: %v; want the injected OUTCOME_UNKNOWN", err)
	}
	w.expectQueued(t, 3)
	// And the next request too, without a failure in between.
	if r := record(t, h.svc, timeoutOn("p", execute, "s")); r.GetSequence() != 5 || r.GetRetryCount() != 6 {
		t.Fatalf("after: sequence %d retry_count %d; want 5 6", r.GetSequence(), r.GetRetryCount())
	}
	recs := history(t, h.svc, "p")
	if len(recs) != 6 {
		t.Fatalf("history has %d records, want 6", len(recs))
	}
	for i, rec := range recs {
		if rec.GetSequence() != int64(i) || rec.GetRetryCount() != int32(i+1) {
			t.Fatalf("history[%d]: sequence %d retry_count %d", i, rec.GetSequence(), rec.GetRetryCount())
		}
	}
}

// heldWrite is a write A, held in flight with a fault armed for it, and two
// requests B and C queued behind it on plan "p".
type heldWrite struct {
	a    <-chan error
	b, c directory.ChanReplier
}

// queueTwoBehindAHeldWrite holds the next write, arms it with arm, starts
// A, and sends B and C to the plan actor while A is in flight. The probe,
// sent after them by the same sender, is answered by the actor itself, so
// when it returns B and C are queued. Then A is released.
func queueTwoBehindAHeldWrite(t *testing.T, h *harness, ctx context.Context, arm func()) heldWrite {
	t.Helper()
	entered, release := h.gate.armHold()
	arm()
	a := make(chan error, 1)
	go func() {
		_, err := h.svc.RecordError(ctx, timeoutOn("p", execute, "s"))
		a <- err
	}()
	<-entered // A's write is in flight and held.
	root := h.sys.Root
	w := heldWrite{a: a, b: make(directory.ChanReplier, 1), c: make(directory.ChanReplier, 1)}
	root.Send(h.svc.PID(), &directory.Call{Msg: timeoutOn("p", execute, "s"), Replier: w.b})
	root.Send(h.svc.PID(), &directory.Call{Msg: timeoutOn("p", execute, "s"), Replier: w.c})
	if _, err := directory.Ask(ctx, root, h.svc.PID(), &planv1.RecordErrorRequest{PlanId: "p", ErrorType: "x"}); !isInvalid(err) {
		t.Fatalf("probe: %v; want INVALID_ARGUMENT", err)
	}
	release()
	return w
}

// expectQueued checks that B and C committed with sequences seq and seq+1
// (retry counts one more: every request is the same step's timeout).
func (w heldWrite) expectQueued(t *testing.T, seq int64) {
	t.Helper()
	for i, ch := range []directory.ChanReplier{w.b, w.c} {
		r := <-ch
		if r.Err != nil {
			t.Fatalf("queued request %d: %v", i, r.Err)
		}
		rec := r.Msg.(*planv1.RecordErrorResponse).GetRecord()
		want := seq + int64(i)
		if rec.GetSequence() != want || rec.GetRetryCount() != int32(want+1) {
			t.Fatalf("queued request %d: sequence %d retry_count %d; want %d %d", i, rec.GetSequence(), rec.GetRetryCount(), want, want+1)
		}
	}
}
