package postgres

import (
	"context"
	"errors"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

func planCmd(planID string, epoch int64, records ...*planv1.ErrorRecord) *persistence.PlanWrite {
	return &persistence.PlanWrite{Epoch: epoch, PlanID: planID, Records: records,
		StepRetries: []persistence.StepRetry{{Phase: planv1.Phase_PHASE_EXECUTE, StepID: "s", Count: int32(len(records))}},
		Audit:       []*auditv1.AuditEntry{entry("plan_error_recorded")}}
}

// Plan writes that hold commit through the pipeline, without a replay,
// two of one plan in one batch included; one that does not hold (a stored
// record id, a sequence the plan does not continue, a stale epoch) replays
// the batch, and each command gets its real result.
func TestPipelinedPlanWrites(t *testing.T) {
	a, _ := twoNodes(t)
	a.ok(&persistence.Activate{Kind: persistence.OwnerPlan, ID: "p"})
	r0, r1, r2 := planRecord("p", 0), planRecord("p", 1), planRecord("q", 0)
	before := a.store.replays
	for i, r := range a.apply(planCmd("p", 1, r0), planCmd("p", 1, r1), planCmd("q", 0, r2)) {
		if r.Err != nil {
			t.Fatalf("command %d: %v", i, r.Err)
		}
	}
	if a.store.replays != before {
		t.Fatal("a batch of plan writes that all hold was replayed")
	}
	res := a.apply(
		planCmd("p", 1, planRecord("p", 2)),
		planCmd("q", 0, r2),                 // stored already: a retry
		planCmd("q", 0, planRecord("q", 5)), // the next sequence is 1
		planCmd("p", 2, planRecord("p", 3)), // fenced: never that epoch
		planCmd("p", 1, planRecord("p", 3)),
	)
	if a.store.replays != before+1 {
		t.Fatalf("%d replays, want 1", a.store.replays-before)
	}
	var exist *persistence.RecordsExistError
	switch {
	case res[0].Err != nil || res[4].Err != nil:
		t.Fatalf("good writes: %v, %v", res[0].Err, res[4].Err)
	case !errors.As(res[1].Err, &exist) || len(exist.Stored) != 1 || exist.Stored[0].RecordId != r2.RecordId:
		t.Fatalf("retried record: %v", res[1].Err)
	case errs.CodeOf(res[2].Err) != errs.FailedPreconditionCode:
		t.Fatalf("record past the sequence: %v", res[2].Err)
	case !errors.Is(res[3].Err, persistence.ErrFenced):
		t.Fatalf("write of a future epoch: %v", res[3].Err)
	}
	for id, want := range map[string]int64{"p": 4, "q": 1} {
		p, err := a.store.Reader().GetPlan(context.Background(), persistence.DefaultScopeNamespace, id)
		if err != nil || p.NextSequence != want {
			t.Fatalf("plan %s: %+v %v, want next sequence %d", id, p, err, want)
		}
	}
	// Entries: the first batch's three, the second's two good writes'.
	if n := len(verifyChain(t, a.store.Reader())); n != 5 {
		t.Fatalf("%d entries, want 5", n)
	}
}
