package dispatch

import (
	"runtime"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// DefaultThroughput is how many messages a mailbox processes before it
// yields (runtime.Gosched) within one burst; protoactor's own default.
const DefaultThroughput = 300

// Pool is an actor.Dispatcher backed by long-lived worker goroutines.
//
// Invariants: work is unbuffered, so a send succeeds only when a worker is
// idle (blocked receiving): Schedule never queues a burst behind another
// and never blocks. Every function given to Schedule runs exactly once: on
// a worker, or on a new goroutine. A nil on work tells one worker to exit;
// after Close no worker is left, so every send falls through to the
// fallback. work is never closed, so a Schedule racing with Close is safe.
type Pool struct {
	work       chan func()
	workers    int
	throughput int

	closeOnce sync.Once
	wg        sync.WaitGroup
}

var _ actor.Dispatcher = (*Pool)(nil)

// NewPool starts workers goroutines (at least one). Mailboxes scheduled on
// it process throughput messages before yielding (DefaultThroughput when
// throughput <= 0).
func NewPool(workers, throughput int) *Pool {
	if workers < 1 {
		workers = 1
	}
	if throughput <= 0 {
		throughput = DefaultThroughput
	}
	p := &Pool{work: make(chan func()), workers: workers, throughput: throughput}
	p.wg.Add(workers)
	for range workers {
		go p.worker()
	}
	return p
}

func (p *Pool) worker() {
	defer p.wg.Done()
	for fn := range p.work {
		if fn == nil {
			return
		}
		fn()
	}
}

// Schedule runs fn on an idle worker, or on a new goroutine when none is
// idle. It never blocks.
func (p *Pool) Schedule(fn func()) {
	if fn == nil {
		return // nil is the workers' stop signal, never work
	}
	select {
	case p.work <- fn:
	default:
		go fn()
	}
}

// Throughput is the number of messages a mailbox processes before it
// yields.
func (p *Pool) Throughput() int { return p.throughput }

// Close stops every worker once it has finished what it runs, and waits
// for them; bursts scheduled afterwards get goroutines of their own. It may
// be called more than once.
func (p *Pool) Close() {
	p.closeOnce.Do(func() {
		for range p.workers {
			p.work <- nil
		}
	})
	p.wg.Wait()
}

// sharedWorkersPerProc sizes the shared pool: enough idle workers that a
// burst rarely finds none, while a few owners block in Receive (a state
// load reads the store) and the rest keep the processors busy.
const sharedWorkersPerProc = 16

var shared = sync.OnceValue(func() *Pool {
	return NewPool(sharedWorkersPerProc*runtime.GOMAXPROCS(0), DefaultThroughput)
})

// Shared returns the process's pool, started on first use and never
// closed: session and plan owners and their directories run on it.
func Shared() *Pool { return shared() }
