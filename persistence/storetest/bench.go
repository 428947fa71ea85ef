package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Bench is the one store benchmark: every store runs it with the same
// shapes, so that their figures compare (persistence/sqlite and
// persistence/postgres call it from BenchmarkStore). Each op is one Apply,
// as the writer's group commit sends it, built before the clock runs:
//
//   - append/batch=N: N sessions, one single-message turn with its audit
//     entry each (the group commit of N callers on N sessions);
//   - append/sessions=S/rows=1000: 1000 message rows spread over S sessions
//     (many callers per session: per-session coalescing);
//   - audit/batch=N: N RecordAudit commands of one entry each.
//
// Besides ns/op it reports ns/row and rows/s (wall clock, commit included)
// and cpu-ns/row (the process's CPU time per row, which other load on a
// shared machine disturbs far less). Store-specific yardsticks (the raw
// SQLite ceiling, two PostgreSQL writers on one schema) stay with their
// stores.
func Bench(b *testing.B, open func(b *testing.B) persistence.Store) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("append/batch=%d", n), func(b *testing.B) { benchAppend(b, open, n, 1) })
	}
	for _, s := range []int{1, 100} {
		b.Run(fmt.Sprintf("append/sessions=%d/rows=1000", s), func(b *testing.B) { benchAppend(b, open, s, 1000/s) })
	}
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("audit/batch=%d", n), func(b *testing.B) { benchAudit(b, open, n) })
	}
}

var benchContent = strings.Repeat("the quick brown fox jumps over the lazy dog ", 5)

// benchWriter opens a store and takes its writer for the benchmark.
func benchWriter(b *testing.B, open func(b *testing.B) persistence.Store) persistence.Writer {
	b.Helper()
	s := open(b)
	w, err := s.Writer()
	if err != nil {
		s.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		w.Release()
		s.Close()
	})
	return w
}

// applyOK applies cmds in one transaction and fails b unless every
// command committed.
func applyOK(b *testing.B, w persistence.Writer, cmds []persistence.Command) {
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

// benchAppend: each op appends perSession single-message turns to each of
// sessions sessions, with one audit entry per turn.
func benchAppend(b *testing.B, open func(b *testing.B) persistence.Store, sessions, perSession int) {
	w := benchWriter(b, open)
	sids := make([]string, sessions)
	now := timestamppb.Now()
	var setup []persistence.Command
	for i := range sids {
		sids[i] = ids.New()
		setup = append(setup, &persistence.CreateSession{Session: &sessionv1.Session{SessionId: sids[i], ActorName: "bench",
			Namespace: "local", MetadataJson: "{}", State: sessionv1.SessionState_SESSION_STATE_ACTIVE, CreatedAt: now, UpdatedAt: now}})
	}
	applyOK(b, w, setup)
	next := int64(0)
	batch := func() []persistence.Command {
		now := timestamppb.Now()
		cmds := make([]persistence.Command, sessions)
		for k, sid := range sids {
			turns := make([]persistence.Turn, perSession)
			for j := range turns {
				turns[j] = persistence.Turn{
					Messages: []*sessionv1.Message{{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER,
						Content: benchContent, MetadataJson: "{}", CreatedAt: now}},
					Audit: []*auditv1.AuditEntry{{EventId: ids.New(), EventType: "message_appended", SessionId: sid,
						DetailsJson: "{}", CreatedAt: now}},
				}
			}
			cmds[k] = &persistence.AppendMessages{SessionID: sid, NextSequence: next, Turns: turns, UpdatedAt: now.AsTime()}
		}
		next += int64(perSession)
		return cmds
	}
	run(b, w, sessions*perSession, batch)
}

// benchAudit: each op records n entries, one RecordAudit each.
func benchAudit(b *testing.B, open func(b *testing.B) persistence.Store, n int) {
	w := benchWriter(b, open)
	batch := func() []persistence.Command {
		now := timestamppb.Now()
		cmds := make([]persistence.Command, n)
		for i := range cmds {
			cmds[i] = &persistence.RecordAudit{Entries: []*auditv1.AuditEntry{{EventId: ids.New(), EventType: "tool_called",
				ActorName: "bench", DetailsJson: `{"tool":"search"}`, CreatedAt: now}}}
		}
		return cmds
	}
	run(b, w, n, batch)
}

// run times b.N Applies of batches made by next, untimed, before each.
func run(b *testing.B, w persistence.Writer, rowsPerOp int, next func() []persistence.Command) {
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cmds := next()
		c0 := processCPU()
		b.StartTimer()
		applyOK(b, w, cmds)
		b.StopTimer()
		cpu += processCPU() - c0
	}
	rows := float64(b.N * rowsPerOp)
	perRow := float64(b.Elapsed().Nanoseconds()) / rows
	b.ReportMetric(perRow, "ns/row")
	b.ReportMetric(1e9/perRow, "rows/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/rows, "cpu-ns/row")
}
