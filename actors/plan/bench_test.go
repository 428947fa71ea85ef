package plan_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/plan"
	planv1 "github.com/agentstate/agentstate/messages/plan/v1"
)

// BenchmarkRecordError64Plans measures acknowledged (committed) records per
// second with 64 plans recorded into at once, one caller goroutine per
// plan: b.N records in total. Each plan actor coalesces its queued records
// into one write and the audit actor group-commits the plans' writes.
func BenchmarkRecordError64Plans(b *testing.B) { benchmarkRecordError(b, 64) }

// BenchmarkRecordErrorOnePlan64Callers is the seed's shape: 64 callers on
// one plan, whose actor coalesces their records into shared writes.
func BenchmarkRecordErrorOnePlan64Callers(b *testing.B) { benchmarkRecordError(b, 1) }

func benchmarkRecordError(b *testing.B, plans int) {
	const callers = 64
	for _, bc := range []struct {
		name string
		kind storeKind
	}{{"disk-wal-full", onDisk}, {"memory", inMemory}} {
		b.Run(bc.name, func(b *testing.B) {
			h := newHarness(b, bc.kind, plan.Config{})
			ctx := context.Background()
			var issued atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for g := 0; g < callers; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					planID := fmt.Sprintf("bench-plan-%02d", g%plans)
					for i := issued.Add(1); i <= int64(b.N); i = issued.Add(1) {
						_, err := h.svc.RecordError(ctx, &planv1.RecordErrorRequest{
							PlanId: planID, Phase: planv1.Phase_PHASE_EXECUTE, StepId: fmt.Sprintf("step-%d", g),
							ErrorType: "TimeoutError", Message: "upstream call timed out after 30s", Tool: "http",
							ActorName: "executor", AttributesJson: `{"attempt":1}`,
						})
						if err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
		})
	}
}
