package journal_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/agentstate/agentstate/actors/journal"
)

// BenchmarkPersistEvent: one PersistEvent (a conditional append of one
// event, committed on a SQLite file with synchronous=FULL) per op, by C
// callers in total, each the only writer of its own actor's journal, one
// write outstanding each (closed loop). With C > 1 their appends share the
// writer's transactions.
func BenchmarkPersistEvent(b *testing.B) {
	for _, c := range []int{1, 64} {
		b.Run(fmt.Sprintf("C=%d", c), func(b *testing.B) {
			n := startSQLite(b)
			j := journal.New(n.node.Sessions(), journal.Config{SnapshotInterval: 1 << 30})
			ev := event("a small event of about forty bytes......")
			for w := range c { // the sessions exist before the clock runs
				j.PersistEvent(fmt.Sprintf("bench-%d", w), 0, ev)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range c {
				ops := b.N / c
				if w < b.N%c {
					ops++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					name := fmt.Sprintf("bench-%d", w)
					for i := 1; i <= ops; i++ {
						j.PersistEvent(name, i, ev)
					}
				}()
			}
			wg.Wait()
		})
	}
}
