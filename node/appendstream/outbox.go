package appendstream

import (
	"context"
	"runtime"
	"sync"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
)

// budget is a stream's room for appends in flight, in appends and in bytes
// of their requests. An append takes its place before it is handed to a
// worker and gives it back once its outcome was sent (or dropped).
// Acquisition is first come, first served (semaphore.Weighted), so a large
// append is not overtaken by small ones.
type budget struct {
	appends  *semaphore.Weighted
	bytes    *semaphore.Weighted
	maxBytes int64
}

func newBudget(l Limits) *budget {
	return &budget{appends: semaphore.NewWeighted(int64(l.MaxAppends)), bytes: semaphore.NewWeighted(l.MaxBytes), maxBytes: l.MaxBytes}
}

// weight is what an append of size bytes takes of the byte budget: an
// append larger than the whole budget takes all of it, so it runs alone.
func (b *budget) weight(size int64) int64 { return min(size, b.maxBytes) }

// acquire waits for room for one append of size bytes, or until ctx ends.
func (b *budget) acquire(ctx context.Context, size int64) error {
	if err := b.appends.Acquire(ctx, 1); err != nil {
		return err
	}
	if err := b.bytes.Acquire(ctx, b.weight(size)); err != nil {
		b.appends.Release(1)
		return err
	}
	return nil
}

func (b *budget) release(n int, bytes int64) {
	b.bytes.Release(bytes)
	b.appends.Release(int64(n))
}

// outbox sends a stream's outcomes. put only queues an outcome (it runs
// on the goroutine that decided it, often a session actor, and must not
// block); the outbox's sender goroutine (run) sends every outcome queued
// in one message, and goes on until none wait. Woken by the first outcome
// of a commit, it yields once before sending, so that the others the same
// commit decided — answered one after another by their session actors —
// are queued by then and share the message: one write and one read per
// commit and stream instead of one per append, which also matters to
// clients that pay per message received (Python's grpcio: 30-45 µs each).
// An outcome's place in the budget is given back, and serving counted
// down, once the outcome was sent (or dropped): a client that stops
// reading holds its stream at the budget's bound, and a send blocked for
// SendTimeout calls onStall.
//
// Invariants: only the sender goroutine calls stream.Send; sending is set
// while it drains and cleared, under mu, only when nothing is pending, and
// a put that finds nothing pending and no drain under way wakes it; after
// a failed send, or once closed, outcomes are dropped, not sent; every
// outcome put is counted out of serving exactly once.
type outbox struct {
	stream grpc.BidiStreamingServer[sessionv1.AppendBatch, sessionv1.AppendOutcomes]
	budget *budget
	// serving counts the stream's appends whose outcome is not yet sent
	// or dropped; the handler waits for it.
	serving *sync.WaitGroup
	// watchdog fires onStall when a send stays blocked for SendTimeout;
	// only the sender arms and disarms it.
	watchdog    *time.Timer
	sendTimeout time.Duration
	wake        chan struct{} // capacity 1
	quit        chan struct{} // closed by close
	exited      chan struct{} // closed when run returns

	mu      sync.Mutex
	pending []*sessionv1.TaggedOutcome
	sizes   []int64 // each pending outcome's weight in the byte budget
	sending bool
	closed  bool // the handler returned or is returning: no more sends
	err     error
}

func newOutbox(stream grpc.BidiStreamingServer[sessionv1.AppendBatch, sessionv1.AppendOutcomes], l Limits,
	serving *sync.WaitGroup, onStall func()) *outbox {
	o := &outbox{stream: stream, budget: newBudget(l), serving: serving, sendTimeout: l.SendTimeout,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
	o.watchdog = time.AfterFunc(time.Hour, onStall)
	o.watchdog.Stop()
	return o
}

// put queues an outcome whose append weighed size bytes for the sender.
// It never blocks.
func (o *outbox) put(oc *sessionv1.TaggedOutcome, size int64) {
	w := o.budget.weight(size)
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		o.done(1, w)
		return
	}
	o.pending = append(o.pending, oc)
	o.sizes = append(o.sizes, w)
	wake := !o.sending && len(o.pending) == 1
	o.mu.Unlock()
	if wake {
		select {
		case o.wake <- struct{}{}:
		default: // woken already
		}
	}
}

// done counts n outcomes weighing bytes out: sent or dropped.
func (o *outbox) done(n int, bytes int64) {
	o.budget.release(n, bytes)
	o.serving.Add(-n)
}

// run is the stream's sender: it sends what is queued each time it is
// woken, until close.
func (o *outbox) run() {
	defer close(o.exited)
	for {
		select {
		case <-o.wake:
		case <-o.quit:
			return
		}
		// Let the session actors answering the rest of the same commit
		// queue their outcomes first (see outbox).
		runtime.Gosched()
		o.drain()
	}
}

// drain sends the pending outcomes, as many per message as its bounds
// allow, until none are pending.
func (o *outbox) drain() {
	o.mu.Lock()
	o.sending = true
	for len(o.pending) > 0 {
		n, size := 0, 0
		for n < len(o.pending) && n < maxOutcomesPerMessage && (n == 0 || size < maxOutcomeBytes) {
			size += o.pending[n].SizeVT()
			n++
		}
		msg := &sessionv1.AppendOutcomes{Outcomes: o.pending[:n:n]}
		var bytes int64
		for _, b := range o.sizes[:n] {
			bytes += b
		}
		o.pending, o.sizes = o.pending[n:], o.sizes[n:]
		skip := o.err != nil || o.closed
		o.mu.Unlock()
		var err error
		if !skip {
			o.watchdog.Reset(o.sendTimeout)
			err = o.stream.Send(msg)
			o.watchdog.Stop()
		}
		o.done(n, bytes)
		o.mu.Lock()
		if err != nil && o.err == nil {
			o.err = err
		}
	}
	o.pending, o.sizes = nil, nil
	o.sending = false
	o.mu.Unlock()
}

// close stops all sends but one already under way — the handler is
// returning, after which the stream must not be sent on — drops the
// outcomes queued and those put later, and ends the sender once it is
// idle.
func (o *outbox) close() {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.closed = true
	var bytes int64
	for _, b := range o.sizes {
		bytes += b
	}
	n := len(o.pending)
	if o.sending {
		n, bytes = 0, 0 // the sender drops them
	} else {
		o.pending, o.sizes = nil, nil
	}
	o.mu.Unlock()
	if n > 0 {
		o.done(n, bytes)
	}
	close(o.quit)
}

// failure is the first failed send, once every worker has returned.
func (o *outbox) failure() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
