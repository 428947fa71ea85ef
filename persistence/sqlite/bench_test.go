package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Every benchmark op is one transaction of benchRowsPerTx rows. Besides
// ns/row (wall clock, which includes the commit's fsync and is at the
// mercy of a shared machine) they report cpu-ns/row, the process's CPU
// time per row, which other load disturbs far less.
const benchRowsPerTx = 1000

var benchContent = strings.Repeat("the quick brown fox jumps over the lazy dog ", 5)

func benchStore(b *testing.B) (*Store, persistence.Writer) {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	w, err := s.Writer()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		w.Release()
		s.Close()
	})
	return s, w
}

func benchSessions(b *testing.B, w persistence.Writer, n int) []string {
	b.Helper()
	now := timestamppb.Now()
	out := make([]string, n)
	cmds := make([]persistence.Command, n)
	for i := range out {
		out[i] = ids.New()
		cmds[i] = &persistence.CreateSession{Session: &sessionv1.Session{SessionId: out[i], ActorName: "bench",
			Namespace: "local", MetadataJson: "{}", CreatedAt: now, UpdatedAt: now}}
	}
	if _, err := w.Apply(context.Background(), cmds); err != nil {
		b.Fatal(err)
	}
	return out
}

func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// timer measures the timed part of a benchmark in wall and CPU time.
type timer struct {
	b   *testing.B
	cpu int64
	at  int64
}

func startTimer(b *testing.B) *timer {
	b.ResetTimer()
	return &timer{b: b, at: cpuNanos()}
}

func (t *timer) stop() { t.b.StopTimer(); t.cpu += cpuNanos() - t.at }

func (t *timer) start() { t.at = cpuNanos(); t.b.StartTimer() }

func (t *timer) report(rowsPerOp int) {
	t.stop()
	rows := float64(t.b.N * rowsPerOp)
	perRow := float64(t.b.Elapsed().Nanoseconds()) / rows
	t.b.ReportMetric(perRow, "ns/row")
	t.b.ReportMetric(1e9/perRow, "rows/s")
	t.b.ReportMetric(float64(t.cpu)/rows, "cpu-ns/row")
}

var appendShapes = []struct{ sessions, turns int }{{1, 1000}, {100, 10}, {1000, 1}}

// BenchmarkAppend compares Apply with the yardstick of the issue: one
// goroutine inserting the same message rows with one prepared statement in
// 1000-row transactions (raw), on the same schema and pragmas. Each shape
// spreads the 1000 rows of a transaction over that many sessions.
func BenchmarkAppend(b *testing.B) {
	for _, shape := range appendShapes {
		name := fmt.Sprintf("sessions=%d", shape.sessions)
		b.Run("raw/"+name, func(b *testing.B) { benchRawTx(b, shape.sessions, shape.turns) })
		b.Run("apply/"+name, func(b *testing.B) { benchApplyTx(b, shape.sessions, shape.turns) })
	}
}

// BenchmarkApplyAudit commits 1000 audit entries per transaction, as the
// writer's group commit of RecordAudit commands does.
func BenchmarkApplyAudit(b *testing.B) {
	for _, perCmd := range []int{1, 100} {
		b.Run(fmt.Sprintf("entries_per_command=%d", perCmd), func(b *testing.B) {
			_, w := benchStore(b)
			ctx := context.Background()
			t := startTimer(b)
			for i := 0; i < b.N; i++ {
				t.stop()
				now := timestamppb.Now()
				batch := make([]persistence.Command, benchRowsPerTx/perCmd)
				for k := range batch {
					es := make([]*auditv1.AuditEntry, perCmd)
					for j := range es {
						es[j] = &auditv1.AuditEntry{EventId: ids.New(), EventType: "plan_applied", PlanId: "plan-1",
							SessionId: "01J0000000000000000000000", ActorName: "bench", ProjectName: "proj",
							DetailsJson: `{"step":"apply","ok":true}`, CreatedAt: now}
					}
					batch[k] = &persistence.RecordAudit{Entries: es}
				}
				t.start()
				if _, err := w.Apply(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			t.report(benchRowsPerTx)
		})
	}
}

// BenchmarkApplyAuditTx commits transactions of a few one-entry RecordAudit
// commands, as the writer's group commit does for closed-loop sync
// senders (a transaction per round of 1, 16, 64 or 256 senders): what one
// such transaction costs the store alone. The commands are built before
// the clock starts.
func BenchmarkApplyAuditTx(b *testing.B) {
	for _, n := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("commands=%d", n), func(b *testing.B) {
			_, w := benchStore(b)
			ctx := context.Background()
			now := timestamppb.Now()
			batches := make([][]persistence.Command, b.N)
			for i := range batches {
				batches[i] = make([]persistence.Command, n)
				for k := range batches[i] {
					batches[i][k] = &persistence.RecordAudit{Entries: []*auditv1.AuditEntry{benchSyncEntry(now)}}
				}
			}
			t := startTimer(b)
			for i := range b.N {
				if _, err := w.Apply(ctx, batches[i]); err != nil {
					b.Fatal(err)
				}
			}
			t.report(n)
		})
	}
}

// benchSyncEntry is the audit entry of the sync-sized transaction
// benchmarks: the record of the audit package's BenchmarkRecord, as NewEntry builds it.
func benchSyncEntry(now *timestamppb.Timestamp) *auditv1.AuditEntry {
	return &auditv1.AuditEntry{EventId: ids.New(), EventType: "resource_modified", PlanId: "plan-1", ActorName: "bench",
		DetailsJson: `{"resource":"file:///src/main.go","modification":"edit","tool":"write_file"}`, CreatedAt: now}
}

// BenchmarkRawAuditTx is BenchmarkApplyAuditTx's ceiling: the same audit
// rows, positions and chain hashes computed before the clock starts,
// inserted with the store's own multi-row statements on its writer
// connection, with no Apply around them (no validation, hashing, result
// slices or savepoint bookkeeping). Its µs/tx at rows=1 against rows=64
// bounds what any group commit on this store can gain for 64 closed-loop
// sync senders over one transaction per entry: 64 × T(1) / T(64).
func BenchmarkRawAuditTx(b *testing.B) {
	for _, n := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			s, w := benchStore(b)
			w.Release()
			ctx := context.Background()
			now := timestamppb.Now()
			rows := make([][]any, b.N*n)
			prev := ""
			for i := range rows {
				e := benchSyncEntry(now)
				h := persistence.AuditHash(prev, e)
				rows[i] = []any{int64(i + 1), e.EventId, e.EventType, e.PlanId, e.SessionId, e.ProjectName,
					e.ActorName, e.UserIdentity, e.DetailsJson, now.AsTime().UnixNano(), prev, h, e.Principal, persistence.DefaultNamespace}
				prev = h
			}
			args := make([]any, 0, auditColumnsN*auditChunks[0])
			t := startTimer(b)
			for i := range b.N {
				tx, err := s.wconn.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				batch := rows[i*n : (i+1)*n]
				err = inChunks(&batch, auditChunks[:], func(chunk [][]any) error {
					args = args[:0]
					for _, r := range chunk {
						args = append(args, r...)
					}
					_, err := tx.ExecContext(ctx, insertAuditSQL[len(chunk)], args...)
					return err
				})
				if err != nil {
					_ = tx.Rollback() // the store's cleanup would wait on the open transaction
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			t.report(n)
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/tx")
		})
	}
}

// closedLoopShapes are the transactions that issue 17's workloads make: W1's
// 64 callers over 64 sessions commit one append per session, W2's 16
// callers on one session commit the session's one write of ~8 queued
// appends (its callers alternate in two cohorts), and what a 16-append
// write would be.
var closedLoopShapes = []struct {
	name            string
	sessions, turns int
}{{"W1/sessions=64xturns=1", 64, 1}, {"W2/sessions=1xturns=8", 1, 8}, {"W2/sessions=1xturns=16", 1, 16},
	{"W3/sessions=256xturns=1", 256, 1}}

// BenchmarkApplyClosedLoop measures Apply on the transactions of the
// closed-loop workloads against raw inserts of the same rows in
// transactions of the same size: where Apply's per-transaction and
// per-command costs show, which 1000-row transactions hide.
func BenchmarkApplyClosedLoop(b *testing.B) {
	for _, shape := range closedLoopShapes {
		b.Run("raw/"+shape.name, func(b *testing.B) { benchRawTx(b, shape.sessions, shape.turns) })
		b.Run("apply/"+shape.name, func(b *testing.B) { benchApplyTx(b, shape.sessions, shape.turns) })
	}
}

func benchRawTx(b *testing.B, nSessions, perSession int) {
	s, w := benchStore(b)
	sessions := benchSessions(b, w, nSessions)
	w.Release()
	ctx := context.Background()
	stmt, err := s.wconn.PrepareContext(ctx, insertMessageSQL)
	if err != nil {
		b.Fatal(err)
	}
	defer stmt.Close()
	rows := nSessions * perSession // 1000 in every BenchmarkAppend shape
	msgIDs := make([]string, rows)
	seq := int64(0)
	// Pending or settled as the writer writes them (schema migrations 5, 7).
	pending, indexed := int64(0), int64(0)
	if perSession >= pendingRowsPerSession {
		indexed = 1
	}
	t := startTimer(b)
	for i := 0; i < b.N; i++ {
		t.stop()
		for j := range msgIDs {
			msgIDs[j] = ids.New()
		}
		created := time.Now().UnixNano()
		t.start()
		tx, err := s.wconn.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		txStmt := tx.StmtContext(ctx, stmt)
		for k, sid := range sessions {
			for j := 0; j < perSession; j++ {
				if _, err := txStmt.ExecContext(ctx, sid, seq+int64(j), msgIDs[k*perSession+j], int64(1), benchContent, "{}", created, int64(0), indexed, "", ""); err != nil {
					_ = tx.Rollback() // the store's cleanup would wait on the open transaction
					b.Fatal(err)
				}
			}
		}
		seq += int64(perSession)
		if pending += int64(rows); perSession < pendingRowsPerSession && pending >= settleRows {
			// All at once: the work per row of the writer's slices.
			if _, err := tx.ExecContext(ctx, settleToEndSQL, ""); err != nil {
				_ = tx.Rollback()
				b.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, settleDeleteToEndSQL, ""); err != nil {
				_ = tx.Rollback()
				b.Fatal(err)
			}
			pending = 0
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	t.report(rows)
}

func benchApplyTx(b *testing.B, nSessions, perSession int) {
	_, w := benchStore(b)
	sessions := benchSessions(b, w, nSessions)
	next := int64(0)
	ctx := context.Background()
	t := startTimer(b)
	for i := 0; i < b.N; i++ {
		t.stop()
		now := timestamppb.Now()
		batch := make([]persistence.Command, nSessions)
		for k, sid := range sessions {
			turns := make([]persistence.Turn, perSession)
			for j := range turns {
				turns[j].Messages = []*sessionv1.Message{{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER,
					Content: benchContent, MetadataJson: "{}", CreatedAt: now}}
			}
			batch[k] = &persistence.AppendMessages{SessionID: sid, NextSequence: next, Turns: turns, UpdatedAt: time.Now()}
		}
		next += int64(perSession)
		t.start()
		res, err := w.Apply(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		if res[0].Err != nil {
			b.Fatal(res[0].Err)
		}
	}
	t.report(nSessions * perSession)
}

// BenchmarkApplyTransactionSpread applies W1-shaped transactions (64
// sessions × one append, so their rows are written pending and settled
// every few transactions) one after another and reports the spread of the
// transactions' CPU and wall time, not only the mean: a settle that one
// transaction in eight carries shows as the p90/p99 over the p50, which is
// what W1's p99 latency inherits.
func BenchmarkApplyTransactionSpread(b *testing.B) {
	_, w := benchStore(b)
	const nSessions = 64
	sessions := benchSessions(b, w, nSessions)
	ctx := context.Background()
	walls := make([]time.Duration, 0, b.N)
	cpus := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		now := timestamppb.Now()
		batch := make([]persistence.Command, nSessions)
		for k, sid := range sessions {
			batch[k] = &persistence.AppendMessages{SessionID: sid, NextSequence: int64(i), UpdatedAt: time.Now(),
				Turns: []persistence.Turn{{Messages: []*sessionv1.Message{{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER,
					Content: benchContent, MetadataJson: "{}", CreatedAt: now}}}}}
		}
		c0, t0 := cpuNanos(), time.Now()
		res, err := w.Apply(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		walls = append(walls, time.Since(t0))
		cpus = append(cpus, time.Duration(cpuNanos()-c0))
		if res[0].Err != nil {
			b.Fatal(res[0].Err)
		}
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	var sum time.Duration
	for _, c := range cpus {
		sum += c
	}
	at := func(d []time.Duration, q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(float64(sum.Microseconds())/float64(len(cpus)), "cpu-µs/tx")
	b.ReportMetric(at(cpus, 0.5), "cpu-p50-µs")
	b.ReportMetric(at(cpus, 0.9), "cpu-p90-µs")
	b.ReportMetric(at(cpus, 0.99), "cpu-p99-µs")
	b.ReportMetric(at(walls, 0.5), "wall-p50-µs")
	b.ReportMetric(at(walls, 0.9), "wall-p90-µs")
	b.ReportMetric(at(walls, 0.99), "wall-p99-µs")
}
