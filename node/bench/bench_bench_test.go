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

// BenchmarkWorkload runs issue 17's W1 (64 sessions, 64 callers) and W2 (1
// session, 16 callers) in-process with 2,048×b.N appends, and the raw
// ceiling on the same rows, reporting the rate, CPU per append, the tail
// and the ratio to the raw ceiling of the same benchmark; `node bench
// --workload` is the full measurement.
func BenchmarkWorkload(b *testing.B) {
	for _, w := range Workloads[:2] {
		b.Run(w.Name, func(b *testing.B) {
			cfg := Config{Mode: ModeInProcess, Name: w.Name, Sessions: w.Sessions, Callers: w.Callers,
				Appends: 2048 * b.N, DataDir: b.TempDir()}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			if !res.Complete {
				b.Fatalf("incomplete: %+v", res)
			}
			cfg.Mode = ModeRaw
			raw, err := Run(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.AppendsPerSec, "appends/s")
			b.ReportMetric(float64(res.CPUPerAppend.Nanoseconds())/1e3, "cpu-µs/append")
			b.ReportMetric(float64(res.P50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
			b.ReportMetric(res.MeanBatch, "appends/commit")
			b.ReportMetric(res.AppendsPerSec/raw.AppendsPerSec, "of-raw")
		})
	}
}
