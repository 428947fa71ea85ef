package feed_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/feed"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
	"log/slog"
	"path/filepath"
)

// BenchmarkAppendStuckSubscriber measures append throughput (64 parallel
// appenders over 32 sessions) without subscribers and with subscribers
// that stop reading: a session tail on every session and a change tail,
// opened and never read again. It reports the heap after the run (after a
// GC): a stuck tail holds no buffer of its own, so the heap does not grow
// with what it did not read.
func BenchmarkAppendStuckSubscriber(b *testing.B) {
	for _, stuck := range []bool{false, true} {
		b.Run(fmt.Sprintf("stuck=%v", stuck), func(b *testing.B) {
			e := newEnv(b, feed.Config{}, true)
			ids := make([]string, 32)
			for i := range ids {
				ids[i] = e.create()
			}
			if stuck {
				for _, id := range ids {
					t, err := e.hub.TailSession(e.ctx, &feedv1.TailSessionRequest{SessionId: id})
					if err != nil {
						b.Fatal(err)
					}
					defer t.Close()
				}
				t, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{})
				if err != nil {
					b.Fatal(err)
				}
				defer t.Close()
			}
			var n atomic.Int64
			b.SetParallelism(32) // 64 appenders on two cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := ids[n.Add(1)%int64(len(ids))]
					if _, err := e.node.Sessions().Append(e.ctx, &sessionv1.AppendRequest{SessionId: id,
						Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "a message of moderate length, as agents write"}}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}

// BenchmarkCommitToDelivery measures the time from a commit (the writer's
// OnCommit) to each tail's Next returning the message, with 1, 100 and
// 1,000 session tails on the session one writer appends to. It reports
// p50 and p99 over every (message, tail) pair.
func BenchmarkCommitToDelivery(b *testing.B) {
	for _, subs := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("tails=%d", subs), func(b *testing.B) {
			store, err := sqlite.Open(filepath.Join(b.TempDir(), "feed.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			hub := feed.New(store.Reader(), feed.Config{Logger: quiet})
			var commitMu sync.Mutex
			// Commit times of the session's writes, in commit order: its
			// create, then one append (one message) at a time, so the
			// message of sequence s committed at committed[s+1].
			var committed []time.Time
			onCommit := func(cmds []persistence.Command, results []persistence.Result) {
				now := time.Now()
				commitMu.Lock()
				for _, c := range cmds {
					if c.Touches().Session != "" {
						committed = append(committed, now)
					}
				}
				commitMu.Unlock()
				hub.OnCommit(cmds, results)
			}
			sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
			defer sys.Shutdown()
			node, err := actors.Start(sys, store, actors.Config{Writer: writer.Config{Logger: quiet, OnCommit: onCommit}})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			r, err := node.Sessions().Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			id := r.GetSession().GetSessionId()
			// Delivery times per tail, by sequence; matched with the
			// commit times after the run (a tail may read a message from
			// the store before the hook that reports its commit ran).
			got := make([][]time.Time, subs)
			var wg sync.WaitGroup
			for i := 0; i < subs; i++ {
				t, err := hub.TailSession(ctx, &feedv1.TailSessionRequest{SessionId: id})
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer t.Close()
					for len(got[i]) < b.N {
						evs, err := t.Next(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						now := time.Now()
						for range evs {
							got[i] = append(got[i], now) // sequences 0, 1, ... in order
						}
					}
				}()
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := node.Sessions().Append(ctx, &sessionv1.AppendRequest{SessionId: id,
					Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "m"}}}); err != nil {
					b.Fatal(err)
				}
			}
			wg.Wait()
			b.StopTimer()
			var all []time.Duration
			for _, g := range got {
				for seq, at := range g {
					all = append(all, max(0, at.Sub(committed[seq+1])))
				}
			}
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			}
			if err := node.Stop(ctx); err != nil {
				b.Error(err)
			}
			hub.Close(ctx)
		})
	}
}

// BenchmarkChangeFanout measures how many change events per second the
// hub delivers to 100 live change tails while audit records commit: b.N
// records, each delivered to every tail.
func BenchmarkChangeFanout(b *testing.B) {
	const subs = 100
	e := newEnv(b, feed.Config{}, false)
	var wg sync.WaitGroup
	var delivered atomic.Int64
	for i := 0; i < subs; i++ {
		t, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{FromNow: true, Filter: &feedv1.ChangeFilter{EventTypes: []string{"config_changed"}}})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer t.Close()
			for got := 0; got < b.N; {
				evs, err := t.Next(e.ctx)
				if err != nil {
					b.Error(err)
					return
				}
				got += len(evs)
				delivered.Add(int64(len(evs)))
			}
		}()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.node.Audit().Record(e.ctx, &auditv1.RecordRequest{EventType: "config_changed", DetailsJson: "{}"}); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(delivered.Load())/b.Elapsed().Seconds(), "events/s")
}
