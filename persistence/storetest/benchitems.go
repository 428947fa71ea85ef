package storetest

import (
	"context"
	"fmt"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BenchItems measures the keyed reads on a session of n keyed messages,
// n = 100 and 10,000, shaped as a checkpointer's thread: every tenth
// message a "checkpoint" (key cp:<n>), the others its pending writes
// (key w:<checkpoint>:<n>, kind "write"), and one other session of the
// same size beside it. Each op is one read on the store's read side:
//
//   - get-item: GetItem of a checkpoint's key;
//   - list/kind: ListItems of the checkpoints, newest first, limit 10;
//   - list/prefix: ListItems of one checkpoint's writes (key prefix),
//     newest first, limit 10.
//
// Indexed reads (the point of issue 30): the figures at 10,000 stay those
// at 100. Besides ns/op each reports cpu-ns/op, this process's CPU time
// per read (the whole read for SQLite, the client's side for PostgreSQL),
// which a busy shared machine disturbs less.
func BenchItems(b *testing.B, open func(b *testing.B) persistence.Store) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			s := open(b)
			b.Cleanup(func() { s.Close() })
			w, err := s.Writer()
			if err != nil {
				b.Fatal(err)
			}
			id := ids.New()
			for _, sid := range []string{ids.New(), id} {
				fillItems(b, w, sid, n)
			}
			w.Release()
			r, ctx := s.Reader(), context.Background()
			checkpoints := n / 10
			b.Run("get-item", func(b *testing.B) {
				defer cpuPerOp(b)()
				for i := 0; b.Loop(); i++ {
					if _, err := r.GetItem(ctx, id, fmt.Sprintf("cp:%06d", i%checkpoints)); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("list/kind", func(b *testing.B) {
				defer cpuPerOp(b)()
				for b.Loop() {
					page, _, err := r.ListItems(ctx, persistence.ItemFilter{SessionID: id, Kind: "checkpoint", NewestFirst: true, Limit: 10})
					if err != nil || len(page) != 10 {
						b.Fatalf("%d items: %v", len(page), err)
					}
				}
			})
			b.Run("list/prefix", func(b *testing.B) {
				defer cpuPerOp(b)()
				for i := 0; b.Loop(); i++ {
					f := persistence.ItemFilter{SessionID: id, KeyPrefix: fmt.Sprintf("w:%06d:", i%checkpoints), NewestFirst: true, Limit: 10}
					page, _, err := r.ListItems(ctx, f)
					if err != nil || len(page) != 9 {
						b.Fatalf("%d items: %v", len(page), err)
					}
				}
			})
		})
	}
}

// cpuPerOp starts counting the process's CPU time; the func it returns
// reports it per op.
func cpuPerOp(b *testing.B) func() {
	c0 := processCPU()
	return func() { b.ReportMetric(float64((processCPU()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op") }
}

// fillItems stores n keyed messages in a new session sid (see BenchItems),
// in turns of 1,000.
func fillItems(b *testing.B, w persistence.Writer, sid string, n int) {
	b.Helper()
	now := timestamppb.Now()
	res, err := w.Apply(context.Background(), []persistence.Command{&persistence.CreateSession{Session: &sessionv1.Session{
		SessionId: sid, ActorName: "bench", Namespace: "local", MetadataJson: "{}", CreatedAt: now, UpdatedAt: now}}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		b.Fatal(err)
	}
	for from := 0; from < n; from += 1000 {
		var t persistence.Turn
		for i := from; i < min(n, from+1000); i++ {
			m := &sessionv1.Message{MessageId: ids.New(), Role: sessionv1.Role_ROLE_TOOL, Content: benchContent, CreatedAt: now}
			if cp := i / 10; i%10 == 0 {
				m.ItemKey, m.Kind = fmt.Sprintf("cp:%06d", cp), "checkpoint"
			} else {
				m.ItemKey, m.Kind = fmt.Sprintf("w:%06d:%d", cp, i%10), "write"
			}
			t.Messages = append(t.Messages, m)
		}
		res, err := w.Apply(context.Background(), []persistence.Command{&persistence.AppendMessages{SessionID: sid,
			NextSequence: int64(from), Turns: []persistence.Turn{t}}})
		if err == nil {
			err = res[0].Err
		}
		if err == nil {
			err = res[0].Turns[0].Err
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
