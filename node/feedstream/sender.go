package feedstream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// sender is one feed stream's share of the room: what it took for pages
// and the leases of the events it sent, and its stall watchdog.
//
// Invariants: sent is the bytes of this stream's leases not yet given
// back; the watchdog is armed exactly while sent > 0, and re-armed each
// time a lease is given back or part of its event written (the client is
// reading), so it fires only when StallTimeout passed with events in the
// transport and nothing of them leaving it.
type sender struct {
	r *room
	c *connRoom

	mu       sync.Mutex
	sent     int64
	drained  chan struct{} // closed and replaced whenever sent drops
	stall    time.Duration
	watchdog *time.Timer
}

func (r *room) sender(key string, onStall func()) *sender {
	s := &sender{r: r, c: r.join(key), stall: r.lim.StallTimeout, drained: make(chan struct{})}
	s.watchdog = time.AfterFunc(time.Hour, onStall)
	s.watchdog.Stop()
	return s
}

// close leaves the connection's room. Leases still out stay watched: a
// stream that ended while its client does not read its last events still
// holds them in the transport, and stalls like any other.
func (s *sender) close() { s.r.leave(s.c) }

// lease is n bytes of a sent event, given back once, when the transport
// let the event out (or dropped it), or when the connection closed.
type lease struct {
	s    *sender
	n    int64
	done atomic.Bool
}

// lease turns n bytes the stream took into the lease of one event.
func (s *sender) lease(n int64) *lease {
	l := &lease{s: s, n: n}
	if n == 0 {
		l.done.Store(true)
		return l
	}
	r := s.r
	r.mu.Lock()
	closed := s.c.closed
	if !closed {
		s.c.leases[l] = struct{}{}
	}
	r.mu.Unlock()
	if closed {
		// The transport is gone: nothing will hold the event.
		l.done.Store(true)
		r.give(s.c, n)
		return l
	}
	s.mu.Lock()
	if s.sent == 0 {
		s.watchdog.Reset(s.stall)
	}
	s.sent += n
	s.mu.Unlock()
	return l
}

func (l *lease) release() {
	if l.done.Swap(true) {
		return
	}
	s, r := l.s, l.s.r
	r.mu.Lock()
	delete(s.c.leases, l)
	r.forgetLocked(s.c)
	r.mu.Unlock()
	r.give(s.c, l.n)
	s.mu.Lock()
	if s.sent -= l.n; s.sent == 0 {
		s.watchdog.Stop()
	} else {
		s.watchdog.Reset(s.stall)
	}
	close(s.drained)
	s.drained = make(chan struct{})
	s.mu.Unlock()
}

// waitSent waits until what the stream sent and the transport still holds
// is below limit, or ctx ends.
func (s *sender) waitSent(ctx context.Context, limit int64) error {
	for {
		s.mu.Lock()
		sent, drained := s.sent, s.drained
		s.mu.Unlock()
		if sent < limit {
			return nil
		}
		select {
		case <-drained:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// progress reports that part of the lease's event left the transport:
// the client reads, however slowly.
func (l *lease) progress() {
	s := l.s
	s.mu.Lock()
	if s.sent > 0 {
		s.watchdog.Reset(s.stall)
	}
	s.mu.Unlock()
}

// take and tryTake take room for a page (see room.take).
func (s *sender) take(ctx context.Context, n int64) (int64, error) { return s.r.take(ctx, s.c, n) }
func (s *sender) tryTake(n int64) (int64, bool)                    { return s.r.tryTake(s.c, n) }
func (s *sender) give(n int64)                                     { s.r.give(s.c, n) }
