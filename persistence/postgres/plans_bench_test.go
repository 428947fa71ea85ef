package postgres

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

// benchPlans activates n plans through w, as plan owners do (their writes
// then carry epoch 1), and returns their ids.
func benchPlans(b *testing.B, w persistence.Writer, n int) []string {
	b.Helper()
	out := make([]string, n)
	cmds := make([]persistence.Command, n)
	for i := range out {
		out[i] = ids.New()
		cmds[i] = &persistence.Activate{Kind: persistence.OwnerPlan, ID: out[i]}
	}
	applyAllOK(b, w, cmds)
	return out
}

// planBatch is one group commit: for each plan, the PlanWrite a plan actor
// sends for one RecordError (the record, its step counter, the merged
// details and the audit entry).
func planBatch(plans []string, next []int64) []persistence.Command {
	now := timestamppb.Now()
	cmds := make([]persistence.Command, len(plans))
	for i, id := range plans {
		seq := next[i]
		cmds[i] = &persistence.PlanWrite{Epoch: 1, PlanID: id, ErrorDetailsJSON: fmt.Sprintf(`{"retry_count":%d}`, seq+1),
			Records: []*planv1.ErrorRecord{{RecordId: ids.New(), PlanId: id, Sequence: seq, Phase: planv1.Phase_PHASE_EXECUTE,
				StepId: "s1", ErrorType: "TimeoutError", Message: "slow", Tool: "shell", AttributesJson: `{"n":1}`,
				Category: planv1.ErrorCategory_ERROR_CATEGORY_TRANSIENT, IsRetriable: true, RetryCount: int32(seq + 1),
				MaxRetries: 3, RecoveryAction: planv1.RecoveryAction_RECOVERY_ACTION_RETRY, RecordedAt: now}},
			StepRetries: []persistence.StepRetry{{Phase: planv1.Phase_PHASE_EXECUTE, StepID: "s1", Count: int32(seq + 1)}},
			Audit:       []*auditv1.AuditEntry{{EventId: ids.New(), EventType: "plan_error_recorded", PlanId: id, CreatedAt: now}}}
		next[i]++
	}
	return cmds
}

// BenchmarkPlanWrite: each op is one Apply of batch PlanWrites (each one
// record with its step counter, details and audit entry, in distinct
// plans), as the writer's group commit sends them. Reports ns/write.
// The test cluster of .ci/postgres.sh runs with fsync off, so commits
// there cost no disk flush: the figure is round trips and server work.
func BenchmarkPlanWrite(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := mustOpen(b, freshDSN(b), Unshared())
			w, err := s.Writer()
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(w.Release)
			plans := benchPlans(b, w, batch)
			next := make([]int64, batch)
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				res, err := w.Apply(context.Background(), planBatch(plans, next))
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/write")
			b.ReportMetric(0, "ns/op")
		})
	}
}
