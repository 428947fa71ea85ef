package writer

import (
	"context"
	"sync/atomic"

	"github.com/agentstate/agentstate/actors/fairshare"
	"github.com/agentstate/agentstate/messages/errs"
	"golang.org/x/sync/semaphore"
	"google.golang.org/protobuf/proto"
)

// Defaults of a Backlog's bounds.
const (
	// DefaultBacklog is the number of commands that may be pending
	// (accepted, not yet answered) before senders are held back.
	DefaultBacklog = 10000
	// DefaultBacklogBytes bounds the bytes those commands carry. A
	// command's bytes stay in memory from admission until it is answered
	// (the request, the command built from it, the batch), so this is
	// what bounds a node's memory under many large concurrent writes: a
	// count alone let 300 concurrent 3 MiB appends take a 2 GiB node down
	// at 300 of 10,000 slots. 64 MiB is eight of the writer's largest
	// transactions (DefaultMaxBatchBytes), enough to keep it busy; the
	// node's soak (issue 15) holds 768 MiB with every attack at once only
	// when what the writer may have pending is a small part of that:
	// the requests behind these bytes are held decoded, and more arrive
	// (received, decoded, refused) while the backlog is full.
	DefaultBacklogBytes = 64 << 20
)

// Backlog bounds what is pending at the writer, in commands and in bytes.
// Every sender takes a slot and its command's size before it hands the
// command over and gives both back once the command is answered (for an
// async record: once it committed). When either bound is reached,
// in-process senders wait in Acquire and network senders are refused by
// TryAcquire with RESOURCE_EXHAUSTED, so a flood can neither grow memory
// without bound nor make the network wait.
//
// A command larger than the whole byte budget is taken as the whole
// budget: it is admitted alone, once nothing else holds bytes, rather than
// never. Larger requests than a node accepts at all are refused before
// admission, by the gRPC server's maximum message size
// (--max-recv-bytes) and the session and plan limits.
//
// Admission is first come, first served: a sender waiting for bytes holds
// back the senders after it (semaphore.Weighted is FIFO), so a large
// command is not starved by a stream of small ones, and a network sender
// is refused while in-process senders wait.
//
// A network sender's slots and bytes are also apportioned by its
// principal (TryAcquireAs, fairshare): a principal already holding some
// of the backlog may take more only within its equal share among the
// principals using it, so one principal's flood leaves the others their
// share. In-process senders (the embedding program) are not apportioned.
//
// Invariants: Pending() and PendingBytes() are what was taken and not yet
// released, never more than the capacities; slots are taken before bytes
// and given back after them, by every sender, so two senders never wait
// for each other. A Backlog is safe for concurrent use.
type Backlog struct {
	slots    chan struct{}
	bytes    *semaphore.Weighted
	capBytes int64
	pending  atomic.Int64 // bytes taken, for metrics
	// shareSlots and shareBytes apportion the slots and bytes among
	// network senders' principals.
	shareSlots, shareBytes *fairshare.Ledger
}

// NewBacklog returns a backlog of n slots (DefaultBacklog when n <= 0) and
// bytes bytes (DefaultBacklogBytes when bytes <= 0).
func NewBacklog(n int, bytes int64) *Backlog {
	if n <= 0 {
		n = DefaultBacklog
	}
	if bytes <= 0 {
		bytes = DefaultBacklogBytes
	}
	return &Backlog{slots: make(chan struct{}, n), bytes: semaphore.NewWeighted(bytes), capBytes: bytes,
		shareSlots: fairshare.NewLedger(int64(n)), shareBytes: fairshare.NewLedger(bytes)}
}

// weight is what a command of size bytes takes of the byte budget: its
// size, at most the whole budget.
func (b *Backlog) weight(size int) int64 { return max(0, min(int64(size), b.capBytes)) }

// Acquire takes a slot and size bytes, waiting while the backlog is full.
// When ctx ends first it returns UNAVAILABLE and holds nothing.
func (b *Backlog) Acquire(ctx context.Context, size int) error {
	select {
	case b.slots <- struct{}{}:
	default:
		select {
		case b.slots <- struct{}{}:
		case <-ctx.Done():
			return errs.Unavailable("writer backlog full (%d commands pending) until the deadline: %v", cap(b.slots), ctx.Err())
		}
	}
	w := b.weight(size)
	if w == 0 || b.bytes.TryAcquire(w) {
		b.pending.Add(w)
		return nil
	}
	if err := b.bytes.Acquire(ctx, w); err != nil {
		<-b.slots
		return errs.Unavailable("writer backlog full (%d of %d bytes pending) until the deadline: %v", b.pending.Load(), b.capBytes, err)
	}
	b.pending.Add(w)
	return nil
}

// TryAcquire takes a slot and size bytes without waiting, for a sender
// that is not apportioned; RESOURCE_EXHAUSTED when either bound is
// reached.
func (b *Backlog) TryAcquire(size int) error { return b.TryAcquireAs("", size) }

// TryAcquireAs takes a slot and size bytes without waiting for a sender
// of principal ("": not apportioned); RESOURCE_EXHAUSTED when either
// bound or the principal's share of either is reached. Give them back
// with ReleaseAs and the same principal.
func (b *Backlog) TryAcquireAs(principal string, size int) error {
	w := b.weight(size)
	if !b.shareSlots.Take(principal, 1) {
		return errs.ResourceExhausted("writer backlog: principal %q holds its share of %d of the %d command slots; retry later",
			principal, b.shareSlots.Share(principal), cap(b.slots))
	}
	if !b.shareBytes.Take(principal, w) {
		b.shareSlots.Give(principal, 1)
		return errs.ResourceExhausted("writer backlog: principal %q holds its share of %d of the %d bytes, %d more refused; retry later",
			principal, b.shareBytes.Share(principal), b.capBytes, size)
	}
	select {
	case b.slots <- struct{}{}:
	default:
		b.unshare(principal, w)
		b.shareSlots.Refused(principal)
		return errs.ResourceExhausted("writer backlog full: %d commands pending; retry later", cap(b.slots))
	}
	if w > 0 && !b.bytes.TryAcquire(w) {
		<-b.slots
		b.unshare(principal, w)
		b.shareBytes.Refused(principal)
		return errs.ResourceExhausted("writer backlog full: %d of %d bytes pending, %d more refused; retry later", b.pending.Load(), b.capBytes, size)
	}
	b.pending.Add(w)
	return nil
}

func (b *Backlog) unshare(principal string, w int64) {
	b.shareBytes.Give(principal, w)
	b.shareSlots.Give(principal, 1)
}

// Release gives back a slot and size bytes. Each successful Acquire or
// TryAcquire must be matched by exactly one Release of the same size.
func (b *Backlog) Release(size int) { b.ReleaseAs("", size) }

// ReleaseAs gives back what TryAcquireAs took for principal.
func (b *Backlog) ReleaseAs(principal string, size int) {
	b.unshare(principal, b.weight(size))
	if w := b.weight(size); w > 0 {
		b.pending.Add(-w)
		b.bytes.Release(w) // panics when more is released than was taken
	}
	select {
	case <-b.slots:
	default:
		panic("writer: Backlog.Release without a matching Acquire")
	}
}

// Pending returns the number of slots taken.
func (b *Backlog) Pending() int { return len(b.slots) }

// PendingBytes returns the bytes taken.
func (b *Backlog) PendingBytes() int64 { return b.pending.Load() }

// Cap returns the number of slots.
func (b *Backlog) Cap() int { return cap(b.slots) }

// CapBytes returns the byte budget.
func (b *Backlog) CapBytes() int64 { return b.capBytes }

// Admit takes a slot and size bytes the way the sender of ctx must:
// waiting when Waits(ctx) (in-process senders), refusing at once
// otherwise (network senders, apportioned by their principal,
// fairshare.From). It returns the principal to give them back as
// (ReleaseAs).
func (b *Backlog) Admit(ctx context.Context, size int) (principal string, err error) {
	if Waits(ctx) {
		return "", b.Acquire(ctx, size)
	}
	principal = fairshare.From(ctx)
	return principal, b.TryAcquireAs(principal, size)
}

// TryAdmit admits a network sender's request without waiting, by its
// RequestSize, as principal ("": not apportioned), and returns the func
// that gives back what it took (call it once, after the request is
// answered).
func (b *Backlog) TryAdmit(principal string, msg proto.Message) (release func(), err error) {
	n := RequestSize(msg)
	if err := b.TryAcquireAs(principal, n); err != nil {
		return nil, err
	}
	return func() { b.ReleaseAs(principal, n) }, nil
}

// RequestSize is the size a request is admitted with: its encoded size,
// which is what it and the command made of it carry.
func RequestSize(msg proto.Message) int {
	if m, ok := msg.(interface{ SizeVT() int }); ok {
		return m.SizeVT()
	}
	return proto.Size(msg)
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
