package dispatch_test

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/dispatch"
	"github.com/asynkron/protoactor-go/actor"
)

func TestScheduleRunsEachFunctionOnce(t *testing.T) {
	p := dispatch.NewPool(4, 0)
	defer p.Close()
	const n = 10000
	var ran [n]atomic.Int32
	var wg sync.WaitGroup
	wg.Add(n)
	for g := range 8 {
		go func() {
			for i := g; i < n; i += 8 {
				p.Schedule(func() { ran[i].Add(1); wg.Done() })
			}
		}()
	}
	wg.Wait()
	for i := range ran {
		if c := ran[i].Load(); c != 1 {
			t.Fatalf("function %d ran %d times, want 1", i, c)
		}
	}
}

// With every worker blocked, Schedule must neither block nor queue: the
// next function runs at once on a goroutine of its own.
func TestScheduleNeverWaitsForBusyWorkers(t *testing.T) {
	p := dispatch.NewPool(2, 0)
	release := make(chan struct{})
	var busy sync.WaitGroup
	busy.Add(2)
	for range 2 {
		p.Schedule(func() { busy.Done(); <-release })
	}
	busy.Wait() // both workers (or fallbacks) are now blocked
	ran := make(chan struct{})
	p.Schedule(func() { close(ran) })
	<-ran // would hang if it queued behind the blocked ones
	close(release)
	p.Close()
}

func TestScheduleAfterClose(t *testing.T) {
	p := dispatch.NewPool(3, 7)
	if got := p.Throughput(); got != 7 {
		t.Fatalf("Throughput() = %d, want 7", got)
	}
	p.Close()
	p.Close() // a second Close is a no-op
	ran := make(chan struct{})
	p.Schedule(func() { close(ran) })
	<-ran
	p.Schedule(nil) // ignored, not a stop signal for anyone
}

// counter checks that one actor's messages arrive in send order and one at
// a time, whichever goroutine runs its mailbox.
type counter struct {
	next    int
	inside  atomic.Int32
	bad     *atomic.Int32
	done    *sync.WaitGroup
	perActr int
}

func (c *counter) Receive(ctx actor.Context) {
	n, ok := ctx.Message().(int)
	if !ok {
		return
	}
	if c.inside.Add(1) != 1 {
		c.bad.Add(1)
	}
	if n != c.next {
		c.bad.Add(1)
	}
	c.next++
	c.inside.Add(-1)
	if c.next == c.perActr {
		c.done.Done()
	}
}

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
}

func TestActorsKeepMailboxOrderOnThePool(t *testing.T) {
	sys := quietSystem()
	defer sys.Shutdown()
	p := dispatch.NewPool(4, 5) // a small throughput: bursts yield and resume often
	defer p.Close()
	const actors, perActor = 50, 2000
	var bad atomic.Int32
	var done sync.WaitGroup
	done.Add(actors)
	pids := make([]*actor.PID, actors)
	for i := range pids {
		props := actor.PropsFromProducer(func() actor.Actor {
			return &counter{bad: &bad, done: &done, perActr: perActor}
		}).Configure(actor.WithDispatcher(p))
		pids[i] = sys.Root.Spawn(props)
	}
	var senders sync.WaitGroup
	for _, pid := range pids {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for n := range perActor {
				sys.Root.Send(pid, n)
			}
		}()
	}
	senders.Wait()
	waitOrFail(t, &done)
	if b := bad.Load(); b != 0 {
		t.Fatalf("%d messages out of order or processed concurrently", b)
	}
}

// waitOrFail bounds a wait that only a bug would make endless.
func waitOrFail(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatal("actors did not receive every message")
	}
}

func TestSharedIsOnePool(t *testing.T) {
	if a, b := dispatch.Shared(), dispatch.Shared(); a != b {
		t.Fatal("Shared() returned two pools")
	}
	if dispatch.Shared().Throughput() != dispatch.DefaultThroughput {
		t.Fatalf("shared throughput %d", dispatch.Shared().Throughput())
	}
}
