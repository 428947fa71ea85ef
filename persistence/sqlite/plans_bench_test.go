package sqlite

import (
	"context"
	"fmt"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// planBenchPlans is how many plans the PlanWrite benchmark writes to, as
// RecordError64Plans (actors/plan) does.
const planBenchPlans = 64

// BenchmarkPlanWrite: each op is one Apply of batch PlanWrites, each the
// write a plan actor sends for one RecordError (the record, its step
// counter, the merged error_details and the plan_error_recorded audit
// entry), in batch distinct plans of 64 taken in turn — what the writer's
// group commit carries at 64 plans × 1 caller (about 40 writes per
// transaction on disk). File database, WAL, synchronous=FULL. Reports
// cpu-ns/row per plan write, the figure that shared cores disturb least.
//
//	go test -run '^$' -bench 'PlanWrite' -benchtime=300x ./persistence/sqlite/
func BenchmarkPlanWrite(b *testing.B) {
	for _, batch := range []int{1, 40} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			_, w := benchStore(b)
			plans := make([]string, planBenchPlans)
			cmds := make([]persistence.Command, len(plans))
			for i := range plans {
				plans[i] = ids.New()
				cmds[i] = &persistence.Activate{Kind: persistence.OwnerPlan, ID: plans[i]}
			}
			mustApply(b, w, cmds)
			next := make([]int64, len(plans))
			turn := 0
			t := startTimer(b)
			for n := 0; n < b.N; n++ {
				t.stop()
				cmds := make([]persistence.Command, batch)
				for i := range cmds {
					p := turn % len(plans)
					turn++
					cmds[i] = benchPlanWrite(plans[p], next[p])
					next[p]++
				}
				t.start()
				mustApply(b, w, cmds)
			}
			t.report(batch)
		})
	}
}

// benchPlanWrite is the PlanWrite of one RecordError as the plan actor
// builds it: its details and audit entry are of the real shape and size.
func benchPlanWrite(planID string, seq int64) *persistence.PlanWrite {
	now := timestamppb.Now()
	return &persistence.PlanWrite{Epoch: 1, PlanID: planID,
		ErrorDetailsJSON: fmt.Sprintf(`{"error_category":"transient","error_phase":"execute","is_retriable":true,`+
			`"max_retries":3,"recovery_action":"retry","recovery_command":"","recovery_hint":"retry the step",`+
			`"retry_count":%d}`, seq%3+1),
		Records: []*planv1.ErrorRecord{{RecordId: ids.New(), PlanId: planID, Sequence: seq,
			Phase: planv1.Phase_PHASE_EXECUTE, StepId: "step-1", ErrorType: "TimeoutError",
			Message: "upstream call timed out after 30s", Tool: "http", ActorName: "executor",
			AttributesJson: `{"attempt":1}`, Category: planv1.ErrorCategory_ERROR_CATEGORY_TRANSIENT,
			IsRetriable: true, RetryCount: int32(seq%3 + 1), MaxRetries: 3,
			RecoveryAction: planv1.RecoveryAction_RECOVERY_ACTION_RETRY, RecoveryHint: "retry the step", RecordedAt: now}},
		StepRetries: []persistence.StepRetry{{Phase: planv1.Phase_PHASE_EXECUTE, StepID: "step-1", Count: int32(seq%3 + 1)}},
		Audit: []*auditv1.AuditEntry{{EventId: ids.New(), EventType: "plan_error_recorded", PlanId: planID,
			ActorName: "executor", CreatedAt: now,
			DetailsJson: fmt.Sprintf(`{"record_id":"%s","sequence":%d,"phase":"execute","step_id":"step-1",`+
				`"error_type":"TimeoutError","tool":"http","category":"transient","retry_count":1,"max_retries":3,`+
				`"recovery_action":"retry"}`, ids.New(), seq)}}}
}

func mustApply(b *testing.B, w persistence.Writer, cmds []persistence.Command) {
	b.Helper()
	res, err := w.Apply(context.Background(), cmds)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}
