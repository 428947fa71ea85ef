package bench

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkIdleRSS creates sessions with their first message (64 callers,
// session actors passivated after 2 s idle), passivates the rest and
// reports the memory the node keeps: idle-RSS-MiB after a forced
// collection, passivated-RSS-MiB before it, the live heap, the creation
// rate and the most actors live at once. One size per process, since RSS
// is the process's: AGENTSTATE_BENCH_IDLE_SESSIONS (default 2,000; the
// figures of docs/BENCHMARKS.md are 10,000 and 1,000,000) and
// AGENTSTATE_BENCH_IDLE_TIMEOUT (default 2s) choose it.
func BenchmarkIdleRSS(b *testing.B) {
	sessions, idle := 2000, 2*time.Second
	if v := os.Getenv("AGENTSTATE_BENCH_IDLE_SESSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("AGENTSTATE_BENCH_IDLE_SESSIONS=%q: %v", v, err)
		}
		sessions = n
	}
	if v := os.Getenv("AGENTSTATE_BENCH_IDLE_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("AGENTSTATE_BENCH_IDLE_TIMEOUT=%q: %v", v, err)
		}
		idle = d
	}
	var res IdleResult
	for range b.N {
		var err error
		res, err = MeasureIdle(context.Background(), IdleConfig{Sessions: sessions, IdleTimeout: idle, DataDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
	}
	const mib = 1 << 20
	b.ReportMetric(float64(res.RSSIdle)/mib, "idle-RSS-MiB")
	b.ReportMetric(float64(res.RSSPassivated)/mib, "passivated-RSS-MiB")
	b.ReportMetric(float64(res.HeapLive)/mib, "heap-MiB")
	b.ReportMetric(res.PerSec, "sessions/s")
	b.ReportMetric(float64(res.PeakLive), "peak-live")
	b.ReportMetric(0, "ns/op")
}
