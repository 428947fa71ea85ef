package audit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/audit/audittest"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
)

// The benchmarks write to a file database in b.TempDir() with WAL and
// synchronous=FULL: every commit is an fsync, so entries/s counts durable
// entries. Each reports entries/s (b.N entries in all, spread over the
// senders) and, for the actor, the mean number of commands per
// transaction.
//
//	go test -run '^$' -bench . -benchtime 3s ./actors/audit/

var benchSenders = []int{1, 16, 64, 256}

func benchRequest(sync bool) *auditv1.RecordRequest {
	return &auditv1.RecordRequest{EventType: audit.EventResourceModified, PlanId: "plan-1", ActorName: "bench",
		DetailsJson: `{"resource":"file:///src/main.go","modification":"edit","tool":"write_file"}`, Sync: sync}
}

// BenchmarkRecord measures Record through the writer actor: async (timed
// until a Flush made every entry durable) and sync (each sender waits for
// its commit).
func BenchmarkRecord(b *testing.B) {
	for _, mode := range []string{"async", "sync"} {
		for _, senders := range benchSenders {
			b.Run(fmt.Sprintf("%s/senders=%d", mode, senders), func(b *testing.B) {
				st, _ := audittest.OpenFile(b, "")
				obs := &audittest.Observer{}
				svc := audittest.Start(b, audittest.NewSystem(b), st, writer.Config{Observer: obs})
				req := benchRequest(mode == "sync")
				ctx := context.Background()
				b.ResetTimer()
				t0, cpu0 := time.Now(), cpuTime()
				spread(b, senders, func() error {
					_, err := svc.Record(ctx, req)
					return err
				})
				if _, err := svc.Flush(ctx, &auditv1.FlushRequest{}); err != nil {
					b.Fatal(err)
				}
				report(b, time.Since(t0), cpuTime()-cpu0)
				batches, _, _, _ := obs.Snapshot()
				if len(batches) > 0 {
					total := 0
					for _, n := range batches {
						total += n
					}
					b.ReportMetric(float64(total)/float64(len(batches)), "cmds/tx")
					b.ReportMetric(float64(obs.ApplyTime().Microseconds())/float64(len(batches)), "apply-µs/tx")
				}
			})
		}
	}
}

// BenchmarkOneTxPerEntry is the baseline: the same rows, built the same
// way, each committed in a transaction of its own on the store's writer
// (serialized, as the writer allows no concurrent use).
func BenchmarkOneTxPerEntry(b *testing.B) {
	for _, senders := range benchSenders {
		b.Run(fmt.Sprintf("senders=%d", senders), func(b *testing.B) {
			st, _ := audittest.OpenFile(b, "")
			w, err := st.Writer()
			if err != nil {
				b.Fatal(err)
			}
			defer w.Release()
			var mu sync.Mutex
			req := benchRequest(true)
			ctx := context.Background()
			b.ResetTimer()
			t0, cpu0 := time.Now(), cpuTime()
			spread(b, senders, func() error {
				e, err := audit.NewEntry(req, time.Now())
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				res, err := w.Apply(ctx, []persistence.Command{&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{e}}})
				if err == nil {
					err = res[0].Err
				}
				return err
			})
			report(b, time.Since(t0), cpuTime()-cpu0)
		})
	}
}

// report adds entries/s and the process CPU time per entry, which moves
// less than the rate when other processes share the cores.
func report(b *testing.B, wall, cpu time.Duration) {
	b.StopTimer()
	b.ReportMetric(float64(b.N)/wall.Seconds(), "entries/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/entry")
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// spread runs op b.N times in all across senders goroutines.
func spread(b *testing.B, senders int, op func() error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, senders)
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := op(); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		b.Fatal(err)
	}
}

// BenchmarkNewEntry: what every Record costs its sender before the writer
// sees the entry (validation, the details' normalization and masking, the
// event id).
func BenchmarkNewEntry(b *testing.B) {
	req := benchRequest(true)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := audit.NewEntry(req, now); err != nil {
			b.Fatal(err)
		}
	}
}
