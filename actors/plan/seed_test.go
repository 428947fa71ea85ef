package plan_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/plan"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"google.golang.org/protobuf/proto"
)

// Seed 003: the original created a plan's history with an unsynchronized
// get-or-create, so concurrent first errors lost records. 64 goroutines
// record 1,000 errors each on one brand-new plan, all at once: every record
// is stored, sequences are dense, each goroutine's step counts 1..1000 in
// order with the actions the table implies, and after passivation the plan
// reloads to the identical history and continues where it was.
func TestSeedConcurrentRecordErrorsOnePlan(t *testing.T) {
	const (
		goroutines = 64
		perG       = 1000
		total      = goroutines * perG
		planID     = "01HXM2A6K1P2E9Q9D4GQ7J4S7Z"
	)
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)

	replies := make([][]*planv1.ErrorRecord, goroutines)
	errc := make(chan error, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			step := fmt.Sprintf("step-%02d", g)
			for i := 0; i < perG; i++ {
				resp, err := h.svc.RecordError(ctx, &planv1.RecordErrorRequest{
					PlanId: planID, Phase: planv1.Phase_PHASE_EXECUTE, StepId: step,
					ErrorType: "TimeoutError", Message: fmt.Sprintf("call %d timed out", i), ActorName: "worker",
				})
				if err != nil {
					errc <- fmt.Errorf("goroutine %d record %d: %w", g, i, err)
					return
				}
				replies[g] = append(replies[g], resp.GetRecord())
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	// Each goroutine's step: retry counts 1..1000 in order; retry while
	// within the default limit (3), escalate after.
	bySeq := make(map[int64]*planv1.ErrorRecord, total)
	for g, recs := range replies {
		if len(recs) != perG {
			t.Fatalf("goroutine %d got %d replies", g, len(recs))
		}
		var lastSeq int64 = -1
		for i, r := range recs {
			want := planv1.RecoveryAction_RECOVERY_ACTION_RETRY
			if i+1 > 3 {
				want = planv1.RecoveryAction_RECOVERY_ACTION_ESCALATE
			}
			if r.GetRetryCount() != int32(i+1) || r.GetRecoveryAction() != want || r.GetMaxRetries() != 3 ||
				r.GetCategory() != planv1.ErrorCategory_ERROR_CATEGORY_TRANSIENT || !r.GetIsRetriable() {
				t.Fatalf("goroutine %d record %d: retry_count %d action %v max %d category %v; want %d %v 3 transient",
					g, i, r.GetRetryCount(), r.GetRecoveryAction(), r.GetMaxRetries(), r.GetCategory(), i+1, want)
			}
			if r.GetSequence() <= lastSeq {
				t.Fatalf("goroutine %d: sequence %d after %d; one caller's records must be in order", g, r.GetSequence(), lastSeq)
			}
			lastSeq = r.GetSequence()
			if prev, dup := bySeq[r.GetSequence()]; dup {
				t.Fatalf("sequence %d given to %s and %s", r.GetSequence(), prev.GetRecordId(), r.GetRecordId())
			}
			bySeq[r.GetSequence()] = r
		}
	}
	for seq := int64(0); seq < total; seq++ {
		if bySeq[seq] == nil {
			t.Fatalf("sequence %d missing: sequences are not dense", seq)
		}
	}

	// The store holds exactly the acknowledged records, each with its
	// plan_error_recorded audit entry.
	stored := history(t, h.svc, planID)
	if len(stored) != total {
		t.Fatalf("history has %d records; want %d", len(stored), total)
	}
	for i, r := range stored {
		if r.GetSequence() != int64(i) || !proto.Equal(r, bySeq[int64(i)]) {
			t.Fatalf("history[%d] = %v; want the acknowledged %v", i, r, bySeq[int64(i)])
		}
	}
	n, err := h.store.Reader().CountAudit(ctx, &auditv1.Filter{EventType: audit.EventPlanErrorRecorded, PlanId: planID})
	if err != nil || n != total {
		t.Fatalf("plan_error_recorded entries: %d, %v; want %d", n, err, total)
	}

	// Passivate and reload: the identical history, and the counters go on.
	h.svc.PassivateAll()
	if a := h.svc.ActiveActors(); a != 0 {
		t.Fatalf("%d plan actors live after PassivateAll", a)
	}
	again := history(t, h.svc, planID)
	if len(again) != len(stored) {
		t.Fatalf("after reload: %d records; want %d", len(again), len(stored))
	}
	for i := range again {
		if !proto.Equal(again[i], stored[i]) {
			t.Fatalf("after reload, record %d differs: %v vs %v", i, again[i], stored[i])
		}
	}
	resp, err := h.svc.RecordError(ctx, &planv1.RecordErrorRequest{
		PlanId: planID, Phase: planv1.Phase_PHASE_EXECUTE, StepId: "step-07", ErrorType: "timeout",
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetRecord(); r.GetSequence() != total || r.GetRetryCount() != perG+1 {
		t.Fatalf("first record after reload: sequence %d retry_count %d; want %d %d", r.GetSequence(), r.GetRetryCount(), total, perG+1)
	}
	if a := h.svc.ActiveActors(); a != 1 {
		t.Fatalf("%d plan actors live; want the one reloaded", a)
	}
}
