package plan_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/writer"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
)

// BenchmarkRecordError64Plans measures acknowledged (committed) records per
// second with 64 plans recorded into at once, one caller goroutine per
// plan: b.N records in total. The writer group-commits the plans'
// writes.
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
			txs := &txCounter{}
			h := newHarnessWith(b, bc.kind, plan.Config{}, writer.Config{Observer: txs}, nil)
			ctx := context.Background()
			var (
				issued atomic.Int64
				wg     sync.WaitGroup
				mu     sync.Mutex
				lat    = make([]time.Duration, 0, b.N)
			)
			b.ResetTimer()
			txs.reset()
			cpu0, start := cpuNanos(), time.Now()
			for g := 0; g < callers; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					planID := fmt.Sprintf("bench-plan-%02d", g%plans)
					var mine []time.Duration
					for i := issued.Add(1); i <= int64(b.N); i = issued.Add(1) {
						t0 := time.Now()
						_, err := h.svc.RecordError(ctx, &planv1.RecordErrorRequest{
							PlanId: planID, Phase: planv1.Phase_PHASE_EXECUTE, StepId: fmt.Sprintf("step-%d", g),
							ErrorType: "TimeoutError", Message: "upstream call timed out after 30s", Tool: "http",
							ActorName: "executor", AttributesJson: `{"attempt":1}`,
						})
						if err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), cpuNanos()-cpu0
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(n/elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(cpu)/n/1e3, "cpu-µs/record")
			slices.Sort(lat)
			pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
			if c, t := txs.load(); t > 0 {
				// Coalescing per plan, then group commit across plans.
				b.ReportMetric(n/float64(c), "records/write")
				b.ReportMetric(float64(c)/float64(t), "writes/tx")
			}
		})
	}
}

// cpuNanos is the process's user+system CPU time.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// txCounter counts the writer's transactions and the commands (plan
// writes) they carried.
type txCounter struct{ commands, txs atomic.Int64 }

func (c *txCounter) BatchCommitted(commands, _ int, _ time.Duration, err error) {
	if err == nil {
		c.commands.Add(int64(commands))
		c.txs.Add(1)
	}
}
func (c *txCounter) AsyncRetried(int, error) {}
func (c *txCounter) AsyncLost(int, error)    {}
func (c *txCounter) reset()                  { c.commands.Store(0); c.txs.Store(0) }
func (c *txCounter) load() (int64, int64)    { return c.commands.Load(), c.txs.Load() }
