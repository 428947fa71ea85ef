package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var benchContent = strings.Repeat("the quick brown fox jumps over the lazy dog ", 5)

// benchSessions activates and creates n sessions through w, as session
// owners do (their writes then carry epoch 1), and returns their ids.
func benchSessions(b *testing.B, w persistence.Writer, n int) []string {
	b.Helper()
	now := timestamppb.Now()
	out := make([]string, n)
	var cmds []persistence.Command
	for i := range out {
		out[i] = ids.New()
		cmds = append(cmds, &persistence.Activate{Kind: persistence.OwnerSession, ID: out[i]},
			&persistence.CreateSession{Epoch: 1, Session: &sessionv1.Session{SessionId: out[i], ActorName: "bench",
				Namespace: "local", MetadataJson: "{}", CreatedAt: now, UpdatedAt: now}})
	}
	applyAllOK(b, w, cmds)
	return out
}

// applyAllOK applies cmds in one transaction and fails tb unless it and
// every command succeeded.
func applyAllOK(tb testing.TB, w persistence.Writer, cmds []persistence.Command) {
	tb.Helper()
	res, err := w.Apply(context.Background(), cmds)
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			tb.Fatal(r.Err)
		}
	}
}

// appendBatch is one group commit: one single-message turn, with its audit
// entry, for each session.
func appendBatch(sessions []string, next []int64) []persistence.Command {
	now := timestamppb.Now()
	cmds := make([]persistence.Command, len(sessions))
	for i, id := range sessions {
		cmds[i] = &persistence.AppendMessages{Epoch: 1, SessionID: id, NextSequence: next[i], UpdatedAt: now.AsTime(),
			Turns: []persistence.Turn{{
				Messages: []*sessionv1.Message{{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER, Content: benchContent, CreatedAt: now}},
				Audit:    []*auditv1.AuditEntry{{EventId: ids.New(), EventType: "message_appended", SessionId: id, CreatedAt: now}},
			}}}
		next[i]++
	}
	return cmds
}

// BenchmarkAppend: each op is one Apply of batch appends (each a turn with
// one message and one audit entry, in distinct sessions), as the audit
// actor's group commit sends them. nodes=2 runs two writers (two Stores on
// one schema) at once, each doing b.N ops: their chain transactions take
// turns on the audit chain locks. Reports ns/append (wall clock over all
// nodes' appends). The test cluster of .ci/postgres.sh runs with fsync off,
// so commits there cost no disk flush.
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct{ nodes, batch int }{{1, 1}, {1, 64}, {2, 64}} {
		b.Run(fmt.Sprintf("nodes=%d/batch=%d", c.nodes, c.batch), func(b *testing.B) {
			dsn := freshDSN(b)
			writers := make([]persistence.Writer, c.nodes)
			sessions := make([][]string, c.nodes)
			for i := range writers {
				s := mustOpen(b, dsn, Unshared())
				w, err := s.Writer()
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(w.Release)
				writers[i], sessions[i] = w, benchSessions(b, w, c.batch)
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			for i, w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					next := make([]int64, c.batch)
					for n := 0; n < b.N; n++ {
						res, err := w.Apply(context.Background(), appendBatch(sessions[i], next))
						if err != nil {
							b.Error(err)
							return
						}
						for _, r := range res {
							if r.Err != nil {
								b.Error(r.Err)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			appends := float64(b.N * c.batch * c.nodes)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/appends, "ns/append")
			b.ReportMetric(0, "ns/op")
		})
	}
}
