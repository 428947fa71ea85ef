package bench

import (
	"context"
	"testing"
)

// BenchmarkModes runs every mode on a small S=4×C=4 workload of 64×b.N
// appends and reports its rate and tail latency; `node bench` is the full
// measurement.
func BenchmarkModes(b *testing.B) {
	for _, mode := range Modes {
		b.Run(mode, func(b *testing.B) {
			cfg := Config{Mode: mode, Sessions: 4, Clients: 4, Appends: 64 * b.N, DataDir: b.TempDir()}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			if mode != ModeBaseline && !res.Complete {
				b.Fatalf("%s incomplete: %+v", mode, res)
			}
			b.ReportMetric(res.AppendsPerSec, "appends/s")
			b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
			b.ReportMetric(res.MeanBatch, "appends/commit")
		})
	}
}
