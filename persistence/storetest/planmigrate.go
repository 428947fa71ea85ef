package storetest

import (
	"context"
	"testing"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// OldPlanRows are the rows a build from before plan namespaces stored for
// its plan OldPlanID: the plan (policy 5), its step counter and its
// records at sequences 0 and 1. Each store's migration test inserts them
// with the schema of that build and then calls CheckMigratedPlans.
const OldPlanID = "old-plan"

// OldPlanRecordIDs are the record ids of OldPlanID's two records.
var OldPlanRecordIDs = [2]string{"01J0000000000000000000000A", "01J0000000000000000000000B"}

// CheckMigratedPlans checks that the plan of OldPlanRows is in the default
// namespace after the migration, whole, that its sequence continues there,
// and that the same plan id in another namespace is a new plan.
func CheckMigratedPlans(t *testing.T, s persistence.Store) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{"", persistence.DefaultNamespace} {
		p, err := s.Reader().GetPlan(ctx, ns, OldPlanID)
		if err != nil {
			t.Fatalf("GetPlan(%q, %s) after the migration: %v", ns, OldPlanID, err)
		}
		if p.Namespace != persistence.DefaultNamespace || p.MaxRetries != 5 || p.NextSequence != 2 || len(p.StepRetries) != 1 {
			t.Fatalf("migrated plan: %+v", p)
		}
	}
	recs, err := s.Reader().PlanHistory(ctx, persistence.PlanFilter{PlanID: OldPlanID})
	if err != nil || len(recs) != 2 {
		t.Fatalf("history after the migration: %v (%v), want 2 records", recs, err)
	}
	for i, r := range recs {
		if r.RecordId != OldPlanRecordIDs[i] || r.Namespace != persistence.DefaultNamespace || r.Sequence != int64(i) {
			t.Fatalf("migrated record %d: %v", i, r)
		}
	}
	if _, err := s.Reader().GetPlan(ctx, "other", OldPlanID); errs.CodeOf(err) != errs.NotFoundCode {
		t.Fatalf("the plan id in namespace other: %v, want NOT_FOUND", err)
	}
	rec := func(seq int64) *planv1.ErrorRecord {
		return &planv1.ErrorRecord{RecordId: ids.New(), PlanId: OldPlanID, Sequence: seq, Phase: planv1.Phase_PHASE_EXECUTE,
			StepId: "s", ErrorType: "E", AttributesJson: "{}", RecordedAt: timestamppb.Now()}
	}
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	// A gap is still refused (the dense-sequence check moved with the
	// tables), sequence 2 continues the old plan, and namespace other's
	// plan of the same id starts at 0.
	res, err := w.Apply(ctx, []persistence.Command{
		&persistence.PlanWrite{PlanID: OldPlanID, Records: []*planv1.ErrorRecord{rec(3)}},
		&persistence.PlanWrite{PlanID: OldPlanID, Records: []*planv1.ErrorRecord{rec(2)}},
		&persistence.PlanWrite{Namespace: "other", PlanID: OldPlanID, Records: []*planv1.ErrorRecord{rec(0)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if errs.CodeOf(res[0].Err) != errs.FailedPreconditionCode || res[1].Err != nil || res[2].Err != nil {
		t.Fatalf("writes after the migration: %v, %v, %v; want FAILED_PRECONDITION, ok, ok", res[0].Err, res[1].Err, res[2].Err)
	}
	if p, err := s.Reader().GetPlan(ctx, "", OldPlanID); err != nil || p.NextSequence != 3 {
		t.Fatalf("migrated plan after a write: %+v (%v), want next sequence 3", p, err)
	}
	if p, err := s.Reader().GetPlan(ctx, "other", OldPlanID); err != nil || p.NextSequence != 1 {
		t.Fatalf("plan other/%s: %+v (%v), want next sequence 1", OldPlanID, p, err)
	}
}
