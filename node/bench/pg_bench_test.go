package bench

import (
	"context"
	"testing"

	"github.com/agentstate/agentstate/persistence/postgres/pgtest"
)

// BenchmarkPostgresW1 runs W1 (64 sessions, 64 callers) in-process on the
// PostgreSQL store with 2,048×b.N appends, and the raw PostgreSQL ceiling
// (raw-closed: transactions of 64 rows) on the same rows, each on a fresh
// database of the server AGENTSTATE_TEST_POSTGRES names; it reports the
// rate, CPU per append and the ratio to the ceiling. Without the server it
// skips (fails under CI). `node bench --postgres` is the full measurement.
func BenchmarkPostgresW1(b *testing.B) {
	base := pgtest.Base(b)
	w := Workloads[0]
	cfg := Config{Mode: ModeInProcess, Name: w.Name, Sessions: w.Sessions, Callers: w.Callers,
		Appends: 2048 * b.N, DataDir: b.TempDir(), Postgres: base}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if !res.Complete || res.Unacked > 0 {
		b.Fatalf("the PostgreSQL store did not store what it acknowledged, in order: %+v", res)
	}
	cfg.Mode = ModeRawClosed
	raw, err := Run(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if !raw.Complete {
		b.Fatalf("raw ceiling incomplete: %+v", raw)
	}
	b.ReportMetric(res.AppendsPerSec, "appends/s")
	b.ReportMetric(float64(res.CPUPerAppend.Nanoseconds())/1e3, "cpu-µs/append")
	b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(res.DBCPUPerAppend.Nanoseconds())/1e3, "db-cpu-µs/append")
	b.ReportMetric(float64(raw.DBCPUPerAppend.Nanoseconds())/1e3, "raw-db-cpu-µs/append")
	b.ReportMetric(res.MeanBatch, "appends/commit")
	b.ReportMetric(raw.AppendsPerSec, "raw-appends/s")
	b.ReportMetric(res.AppendsPerSec/raw.AppendsPerSec, "of-raw")
}
