package fairshare

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A Ledger bounds what a principal holds at once; it does not bound how
// fast a principal comes back for more. A principal whose requests are
// each answered in a millisecond holds little of any budget and may still
// take most of the node's CPU (and of every other principal's latency)
// by sending them as fast as they are answered. A Pacer bounds that rate.
//
// The work a principal asks of the node is charged to it in cost units:
// the bytes it sends and is sent, plus OpCost for each operation (a unary
// request, a stream message, each append of a batch). While more than one
// principal was charged within Window, each may run at an equal share of
// Rate; a principal ahead of its share by more than Burst waits (Delay)
// before its next message is read or answered, which holds a closed-loop
// client, and through TCP flow control a streaming one, at that rate. A
// principal alone is never delayed and carries no debt into the moment
// another arrives. The empty principal (the embedding program's own calls,
// a node without authentication) is not paced.
//
// The unit is a byte of work: OpCost is what an operation costs the node
// besides its bytes (decoding, routing, its share of a transaction), so
// that a flood of tiny requests and a flood of large ones are held alike.
type Pacer struct {
	rate  float64 // units per second, shared among the active principals
	burst int64   // ns of work a principal may run ahead of its share
	now   func() int64

	mu      sync.Mutex
	users   map[string]*pace
	active  int   // accounts charged within Window, as of the last sweep plus arrivals since
	sweepAt int64 // when the next sweep recounts active and drops idle accounts
	// contended mirrors active > 1 for Delay's lock-free answer while one
	// principal uses the node (the common case: nothing to wait for).
	contended atomic.Bool
}

// OpCost is what one operation is charged besides its bytes: about what
// the node spends on a small unary request (receiving, decoding,
// authorizing, routing, its part of a commit), expressed in the bytes a
// large request costs for the same CPU.
const OpCost = 8 << 10

// DefaultRate is the work per second apportioned among the principals
// using the node at once (--grpc-share-rate): at OpCost per operation,
// 4,096 small operations per second, well under what a 2-core node serves,
// so that a principal held to its share leaves the others their
// throughput; a principal alone is not held to it.
const DefaultRate = 32 << 20

// DefaultBurst is how far ahead of its share a principal may run before it
// waits: a few of its operations, so that a lone request is never delayed.
const DefaultBurst = 20 * time.Millisecond

// MaxLead bounds how far ahead of its share a principal's charges can put
// it: work charged beyond it (requests refused after their bytes arrived)
// is forgotten, so a principal that stops flooding is paced again at its
// share within MaxLead, not for as long as its flood's bytes would take.
const MaxLead = 5 * time.Second

// pace is one principal's account: due is the moment (ns, monotonic) its
// charged work is paid for at its share; last is when it was last charged.
type pace struct {
	due, last int64
}

// NewPacer returns a pacer of rate units per second (0: DefaultRate) and
// burst (0: DefaultBurst).
func NewPacer(rate int64, burst time.Duration) *Pacer {
	if rate <= 0 {
		rate = DefaultRate
	}
	if burst <= 0 {
		burst = DefaultBurst
	}
	return &Pacer{rate: float64(rate), burst: int64(burst), now: monotonic, users: map[string]*pace{}}
}

// Charge charges principal cost units of work.
func (p *Pacer) Charge(principal string, cost int64) {
	if principal == "" || cost <= 0 {
		return
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sweepLocked(now)
	a := p.users[principal]
	if a == nil {
		a = &pace{last: now - 2*int64(Window)}
		p.users[principal] = a
	}
	if a.last < now-int64(Window) {
		p.active++
		p.contended.Store(p.active > 1)
	}
	a.last = now
	if p.active <= 1 {
		a.due = now // alone: no pacing, and no debt for when another comes
		return
	}
	share := p.rate / float64(p.active)
	a.due = min(max(a.due, now)+int64(float64(cost)*float64(time.Second)/share), now+int64(MaxLead)+p.burst)
}

// Delay is how long principal should wait before the node reads or
// answers its next message: 0 unless another principal is active and
// this one ran ahead of its share by more than the burst.
func (p *Pacer) Delay(principal string) time.Duration {
	if principal == "" || !p.contended.Load() {
		return 0
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sweepLocked(now)
	a := p.users[principal]
	if a == nil || p.active <= 1 {
		return 0
	}
	return time.Duration(a.due - now - p.burst)
}

// DelayBefore is Delay less the share-time of cost, the principal's
// latest charge: how long the request whose receipt was charged cost waits
// for the principal's earlier work. A request is not held for its own
// cost (which would refuse any request larger than the wait a caller
// tolerates), only the next one is.
func (p *Pacer) DelayBefore(principal string, cost int64) time.Duration {
	d := p.Delay(principal)
	if d <= 0 {
		return d
	}
	p.mu.Lock()
	share := p.rate / float64(max(p.active, 1))
	p.mu.Unlock()
	return d - time.Duration(float64(cost)*float64(time.Second)/share)
}

// Wait waits Delay(principal), or until ctx ends (its error then).
func (p *Pacer) Wait(ctx context.Context, principal string) error {
	return p.waitFor(ctx, p.Delay(principal))
}

// WaitBefore waits DelayBefore(principal, cost), or until ctx ends.
func (p *Pacer) WaitBefore(ctx context.Context, principal string, cost int64) error {
	return p.waitFor(ctx, p.DelayBefore(principal, cost))
}

func (p *Pacer) waitFor(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Active is how many principals were charged within Window.
func (p *Pacer) Active() int {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sweepLocked(now)
	return p.active
}

// sweepLocked recounts the active accounts and drops those idle for over
// Window, at most once per tenth of Window: the map holds only principals
// charged recently, and Charge and Delay stay O(1) between sweeps.
func (p *Pacer) sweepLocked(now int64) {
	if now < p.sweepAt {
		return
	}
	p.sweepAt = now + int64(Window)/10
	p.active = 0
	for name, a := range p.users {
		if a.last < now-int64(Window) {
			delete(p.users, name)
			continue
		}
		p.active++
	}
	p.contended.Store(p.active > 1)
}
