package feedstream

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Defaults of Limits.
const (
	// DefaultTotalBytes bounds the bytes of feed events all tails of a
	// node hold at once: the pages read for them and not yet sent, and
	// what the transport keeps of what they sent until their clients'
	// flow control lets it out (issue 26: 300 tails that never read held
	// a gigabyte, three pages each).
	DefaultTotalBytes = 32 << 20
	// DefaultConnBytes bounds what the tails of one client connection
	// hold of it, so that the tails a client stopped reading leave the
	// rest to everybody else: it takes eight connections doing so to
	// hold the whole node's room, and they lose it after StallTimeout.
	DefaultConnBytes = 4 << 20
	// DefaultStreamBytes bounds what one tail has sent and its client not
	// yet read (the transport holds it) before it sends more: a window,
	// so that a stream its client does not read (one of two tails it
	// reads one after the other) leaves the rest of its connection's room
	// to the others.
	DefaultStreamBytes = 1 << 20
	// DefaultStallTimeout is how long a tail may hold sent events its
	// client does not read (none of them leaving the transport) before it
	// ends, RESOURCE_EXHAUSTED, and its connection is closed.
	DefaultStallTimeout = 30 * time.Second
)

// Limits bound what the feed streams hold of a node. Zero fields take the
// defaults.
type Limits struct {
	TotalBytes   int64
	ConnBytes    int64
	StreamBytes  int64
	StallTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.TotalBytes <= 0 {
		l.TotalBytes = DefaultTotalBytes
	}
	if l.ConnBytes <= 0 {
		l.ConnBytes = DefaultConnBytes
	}
	if l.StreamBytes <= 0 {
		l.StreamBytes = DefaultStreamBytes
	}
	if l.StallTimeout <= 0 {
		l.StallTimeout = DefaultStallTimeout
	}
	return l
}

// room is the bytes the feed streams may hold: node-wide, and per client
// connection. A stream takes room for a page before it sends it and each
// event gives its part back once the transport let it out (a lease).
// Room is taken from the connection first, then from the node, each first
// come, first served (semaphore.Weighted), so streams waiting for their
// connection's room do not queue ahead of other connections'.
//
// Invariants (under mu): held is the bytes taken and not given back, and
// never exceeds max; a connection's leases are the ones not yet given
// back, and are given back when it closes (its transport dropped them).
type room struct {
	lim   Limits
	total *semaphore.Weighted
	// most is the largest one take: a page larger than the room of its
	// connection is charged as all of it, and so sent alone.
	most int64

	mu    sync.Mutex
	held  int64
	peak  int64 // the most held at once (tests)
	conns map[string]*connRoom
}

func newRoom(l Limits) *room {
	l = l.withDefaults()
	return &room{lim: l, total: semaphore.NewWeighted(l.TotalBytes), most: min(l.TotalBytes, l.ConnBytes),
		conns: map[string]*connRoom{}}
}

// connRoom is one connection's room.
type connRoom struct {
	key    string
	sem    *semaphore.Weighted
	users  int // streams using it
	leases map[*lease]struct{}
	closed bool
}

// join returns the room of the connection named key, for one stream;
// leave when the stream ends.
func (r *room) join(key string) *connRoom {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.conns[key]
	if c == nil {
		c = &connRoom{key: key, sem: semaphore.NewWeighted(r.lim.ConnBytes), leases: map[*lease]struct{}{}}
		r.conns[key] = c
	}
	c.users++
	return c
}

func (r *room) leave(c *connRoom) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.users--
	r.forgetLocked(c)
}

// forgetLocked drops an unused connection's room from the map.
func (r *room) forgetLocked(c *connRoom) {
	if c.users == 0 && len(c.leases) == 0 && r.conns[c.key] == c {
		delete(r.conns, c.key)
	}
}

// take waits for n bytes (at most r.most) of c's room and the node's, or
// until ctx ends; it returns what it took.
func (r *room) take(ctx context.Context, c *connRoom, n int64) (int64, error) {
	n = min(n, r.most)
	if err := c.sem.Acquire(ctx, n); err != nil {
		return 0, err
	}
	if err := r.total.Acquire(ctx, n); err != nil {
		c.sem.Release(n)
		return 0, err
	}
	r.count(n)
	return n, nil
}

// tryTake takes n bytes (at most r.most) if both rooms have them now and
// nobody waits ahead.
func (r *room) tryTake(c *connRoom, n int64) (int64, bool) {
	n = min(n, r.most)
	if !c.sem.TryAcquire(n) {
		return 0, false
	}
	if !r.total.TryAcquire(n) {
		c.sem.Release(n)
		return 0, false
	}
	r.count(n)
	return n, true
}

// give gives back n bytes taken from c.
func (r *room) give(c *connRoom, n int64) {
	if n == 0 {
		return
	}
	r.count(-n)
	r.total.Release(n)
	c.sem.Release(n)
}

func (r *room) count(n int64) {
	r.mu.Lock()
	r.held += n
	r.peak = max(r.peak, r.held)
	r.mu.Unlock()
}

// Held is the bytes the feed streams hold now.
func (r *room) Held() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// connClosed gives back the leases of the connection named key: its transport
// dropped what it held.
func (r *room) connClosed(key string) {
	r.mu.Lock()
	c := r.conns[key]
	var ls []*lease
	if c != nil {
		c.closed = true
		for l := range c.leases {
			ls = append(ls, l)
		}
		delete(r.conns, key)
	}
	r.mu.Unlock()
	for _, l := range ls {
		l.release()
	}
}
