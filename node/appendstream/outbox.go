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

// outbox sends a stream's outcomes. The worker that puts an outcome while
// no send is under way becomes the sender: it sends every outcome put by
// then in one message, and goes on until none wait; the others only queue
// theirs. So a lone outcome costs no hand-off to another goroutine, and
// under load one message carries many. An outcome's place in the budget is
// given back once the outcome was sent: a client that stops reading holds
// its stream at the budget's bound, and a send blocked for SendTimeout
// calls onStall.
//
// Invariants: at most one goroutine (the one that set sending) calls
// stream.Send; sending is cleared, under mu, only when nothing is pending;
// after a failed send, or once closed, outcomes are dropped, not sent.
type outbox struct {
	stream grpc.BidiStreamingServer[sessionv1.AppendBatch, sessionv1.AppendOutcomes]
	budget *budget
	// watchdog fires onStall when a send stays blocked for SendTimeout;
	// only the sender arms and disarms it.
	watchdog    *time.Timer
	sendTimeout time.Duration

	mu      sync.Mutex
	pending []*sessionv1.TaggedOutcome
	sizes   []int64 // each pending outcome's weight in the byte budget
	sending bool
	closed  bool // the handler returned or is returning: no more sends
	err     error
}

func newOutbox(stream grpc.BidiStreamingServer[sessionv1.AppendBatch, sessionv1.AppendOutcomes], l Limits, onStall func()) *outbox {
	o := &outbox{stream: stream, budget: newBudget(l), sendTimeout: l.SendTimeout}
	o.watchdog = time.AfterFunc(time.Hour, onStall)
	o.watchdog.Stop()
	return o
}

// put queues an outcome whose append weighed size bytes and, unless a send
// is under way, sends everything queued.
func (o *outbox) put(oc *sessionv1.TaggedOutcome, size int64) {
	o.mu.Lock()
	o.pending = append(o.pending, oc)
	o.sizes = append(o.sizes, o.budget.weight(size))
	if o.sending {
		o.mu.Unlock()
		return
	}
	o.sending = true
	// The appends of one commit are answered together: yield once, so the
	// workers woken by the same commit queue their outcomes before this one
	// sends, and one message carries them all. A client that pays per
	// message received (Python's grpcio: 30-45 µs each) then pays a fifth
	// as often; a lone outcome waits only for the goroutines already
	// runnable.
	o.mu.Unlock()
	runtime.Gosched()
	o.mu.Lock()
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
		o.budget.release(n, bytes)
		o.mu.Lock()
		if err != nil && o.err == nil {
			o.err = err
		}
	}
	o.pending, o.sizes = nil, nil
	o.sending = false
	o.mu.Unlock()
}

// close stops all sends but one already under way: the handler is
// returning, after which the stream must not be sent on.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}

// failure is the first failed send, once every worker has returned.
func (o *outbox) failure() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
