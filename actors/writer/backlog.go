package writer

import (
	"context"

	"github.com/agentstate/agentstate/messages/errs"
)

// DefaultBacklog is the number of commands that may be pending (accepted,
// not yet committed) before senders are held back.
const DefaultBacklog = 10000

// Backlog bounds the commands pending at the writer. Every sender takes a
// slot before it hands a command over and gives it back once the command is
// answered (for an async record: once it committed). When every slot is
// taken, in-process senders wait in Acquire and network senders are refused
// by TryAcquire with RESOURCE_EXHAUSTED, so a flood can neither grow memory
// without bound nor make the network wait.
//
// Invariant: Pending() == slots taken and not yet released, and never more
// than the capacity. A Backlog is safe for concurrent use.
type Backlog struct {
	slots chan struct{}
}

// NewBacklog returns a backlog of n slots (DefaultBacklog when n <= 0).
func NewBacklog(n int) *Backlog {
	if n <= 0 {
		n = DefaultBacklog
	}
	return &Backlog{slots: make(chan struct{}, n)}
}

// Acquire takes a slot, waiting for one while the backlog is full. When ctx
// ends first it returns UNAVAILABLE and holds no slot.
func (b *Backlog) Acquire(ctx context.Context) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return errs.Unavailable("writer backlog full (%d pending) until the deadline: %v", cap(b.slots), ctx.Err())
	}
}

// TryAcquire takes a slot without waiting; RESOURCE_EXHAUSTED when full.
func (b *Backlog) TryAcquire() error {
	select {
	case b.slots <- struct{}{}:
		return nil
	default:
		return errs.ResourceExhausted("writer backlog full: %d commands pending; retry later", cap(b.slots))
	}
}

// Release gives a slot back. Each successful Acquire or TryAcquire must be
// matched by exactly one Release.
func (b *Backlog) Release() {
	select {
	case <-b.slots:
	default:
		panic("writer: Backlog.Release without a matching Acquire")
	}
}

// Pending returns the number of slots taken.
func (b *Backlog) Pending() int { return len(b.slots) }

// Cap returns the number of slots.
func (b *Backlog) Cap() int { return cap(b.slots) }

// Admit takes a slot the way the sender of ctx must: waiting when Waits(ctx)
// (in-process senders), refusing at once otherwise (network senders).
func (b *Backlog) Admit(ctx context.Context) error {
	if Waits(ctx) {
		return b.Acquire(ctx)
	}
	return b.TryAcquire()
}

type noWaitKey struct{}

// NoWait marks ctx as coming from a network sender: a full backlog then
// refuses it with RESOURCE_EXHAUSTED instead of making it wait. gRPC
// handlers and the Proto.Actor remote endpoint set it on every request.
func NoWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, noWaitKey{}, true)
}

// Waits reports whether the sender of ctx waits for a backlog slot (true
// unless ctx was marked with NoWait).
func Waits(ctx context.Context) bool {
	v, _ := ctx.Value(noWaitKey{}).(bool)
	return !v
}
