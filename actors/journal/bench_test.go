package journal_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/agentstate/agentstate/actors/journal"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

// BenchmarkPersistEvent: one PersistEvent (a conditional append of one
// event, committed on a SQLite file with synchronous=FULL) per op, by C
// callers in total, each the only writer of its own actor's journal, one
// write outstanding each (closed loop). With C > 1 their appends share the
// writer's transactions. plain-append is the same load as unconditional
// sessions.Append calls of the same size: what the journal adds is the
// difference.
func BenchmarkPersistEvent(b *testing.B) {
	ev := event("a small event of about forty bytes......")
	for _, c := range []int{1, 64} {
		b.Run(fmt.Sprintf("journal/C=%d", c), func(b *testing.B) {
			n := startSQLite(b)
			j := journal.New(n.node.Sessions(), journal.Config{SnapshotInterval: 1 << 30})
			for w := range c { // the sessions exist before the clock runs
				j.PersistEvent(fmt.Sprintf("bench-%d", w), 0, ev)
			}
			closedLoop(b, c, func(w, i int) error {
				j.PersistEvent(fmt.Sprintf("bench-%d", w), i, ev)
				return nil
			})
		})
		b.Run(fmt.Sprintf("plain-append/C=%d", c), func(b *testing.B) {
			n := startSQLite(b)
			svc := n.node.Sessions()
			ids := make([]string, c)
			for w := range ids {
				r, err := svc.Create(context.Background(), &sessionv1.CreateSessionRequest{ActorName: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				ids[w] = r.GetSession().GetSessionId()
			}
			content := "CihhIHNtYWxsIGV2ZW50IG9mIGFib3V0IGZvcnR5IGJ5dGVzLi4uLi4u" // ev as stored
			closedLoop(b, c, func(w, _ int) error {
				_, err := svc.Append(context.Background(), &sessionv1.AppendRequest{SessionId: ids[w], Messages: []*sessionv1.NewMessage{
					{Role: sessionv1.Role_ROLE_SYSTEM, Content: content, MetadataJson: `{"proto_type":"google.protobuf.StringValue"}`},
				}})
				return err
			})
		})
	}
}

// closedLoop runs b.N calls of op over c goroutines, caller w making its
// calls i = 1, 2, ... one after another.
func closedLoop(b *testing.B, c int, op func(w, i int) error) {
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, c)
	for w := range c {
		ops := b.N / c
		if w < b.N%c {
			ops++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= ops; i++ {
				if err := op(w, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
