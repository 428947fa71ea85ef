package appendstream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/actors/fairshare"
	"github.com/agentstate/agentstate/messages/errs"
	"golang.org/x/sync/semaphore"
)

// Defaults of Limits: what one AppendBatches stream may hold of a node.
const (
	// DefaultMaxAppends bounds the appends one stream has between their
	// receipt and the send of their outcome. Each is a worker goroutine
	// while it is served; a Go client has one stream per connection, so
	// this is the concurrency of one connection's callers (node bench
	// runs one connection per core).
	DefaultMaxAppends = 1024
	// DefaultMaxBytes bounds the encoded requests of those appends. The
	// Go client sends an append above 1 MiB alone on AppendStream, so a
	// batch stream's appends are small; one larger than the bound is
	// admitted alone, once nothing else of its stream is in flight.
	DefaultMaxBytes = 8 << 20
	// DefaultSendTimeout is how long one send of outcomes may stay
	// blocked (HTTP/2 flow control: the client does not read) before the
	// stream stops being served and ends.
	DefaultSendTimeout = 15 * time.Second
	// DefaultTotalAppends bounds the appends of all streams of a Server
	// (a node) being served at once, from receipt until their outcome is
	// decided: each is a worker goroutine and a decoded request, and a
	// per-stream bound alone multiplies with the streams (issue 15: 40
	// streams that did not read held 21,000 goroutines, 83 MiB of stacks).
	// The idle workers a node keeps for reuse are bounded by it too.
	DefaultTotalAppends = 4096
	// DefaultTotalBytes bounds the encoded requests of those appends.
	DefaultTotalBytes = 32 << 20
	// ContendedShare is the most appends one principal's streams have
	// served at once while another principal's streams append too (alone,
	// a principal may use all of TotalAppends): a few hundred keep group
	// commit's transactions full, and bound what another principal's
	// appends wait behind in the writer.
	ContendedShare = 32
)

// Limits bound what one AppendBatches stream may hold of the node. Past
// MaxAppends or MaxBytes the server stops reading the stream, so HTTP/2
// flow control holds the client back; a client that does not read its
// outcomes for SendTimeout loses the stream. Zero fields take the
// defaults.
type Limits struct {
	MaxAppends  int
	MaxBytes    int64
	SendTimeout time.Duration
	// TotalAppends and TotalBytes bound the appends of all streams of
	// the Server together while they are served (their outcome is not
	// yet decided); past either, the stream that receives waits, so its
	// client is held back by flow control. An outcome decided and not
	// yet sent still counts against its own stream's MaxAppends and
	// MaxBytes only: a client that does not read holds no room of the
	// others.
	TotalAppends int
	TotalBytes   int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxAppends <= 0 {
		l.MaxAppends = DefaultMaxAppends
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.SendTimeout <= 0 {
		l.SendTimeout = DefaultSendTimeout
	}
	if l.TotalAppends <= 0 {
		l.TotalAppends = DefaultTotalAppends
	}
	if l.TotalBytes <= 0 {
		l.TotalBytes = DefaultTotalBytes
	}
	return l
}

// shared is the room all streams of a Server share: appends being served,
// in count and bytes (first come, first served, like a stream's budget),
// and the idle workers kept for reuse.
type shared struct {
	appends  *semaphore.Weighted
	bytes    *semaphore.Weighted
	maxBytes int64
	// shares apportions the appends being served among the streams'
	// principals (fairshare): one principal's streams that stopped
	// reading, or that flood one session, hold at most an equal share
	// while another principal's appends wait. wake is closed (and
	// replaced) whenever room is given back, for the streams waiting for
	// their principal's share.
	shares  *fairshare.Ledger
	mu      sync.Mutex
	wake    chan struct{}
	waiters atomic.Int64
	// idle counts the workers of all streams waiting for a job; a worker
	// that finds maxIdle others waiting ends instead.
	idle    atomic.Int64
	maxIdle int64
}

// shared returns the Server's shared budget, made on first use from
// Limits.
func (s *Server) shared() *shared {
	s.sharedOnce.Do(func() {
		l := s.Limits.withDefaults()
		s.sharedRoom = &shared{appends: semaphore.NewWeighted(int64(l.TotalAppends)), bytes: semaphore.NewWeighted(l.TotalBytes),
			maxBytes: l.TotalBytes, maxIdle: int64(l.TotalAppends), shares: fairshare.NewLedger(int64(l.TotalAppends)).WithContendedShare(ContendedShare),
			wake: make(chan struct{})}
	})
	return s.sharedRoom
}

// acquire waits for room to serve one append of size bytes for principal
// ("": not apportioned) within its share, or until ctx ends.
func (r *shared) acquire(ctx context.Context, principal string, size int64) error {
	for !r.shares.Take(principal, 1) {
		// Registered before the second try: a release after that try
		// sees the waiter and wakes it; one before it made the try
		// succeed.
		r.mu.Lock()
		r.waiters.Add(1)
		wake := r.wake
		r.mu.Unlock()
		if r.shares.Take(principal, 1) {
			r.waiters.Add(-1)
			break
		}
		select {
		case <-wake:
			r.waiters.Add(-1)
		case <-ctx.Done():
			r.waiters.Add(-1)
			return ctx.Err()
		}
	}
	if err := r.appends.Acquire(ctx, 1); err != nil {
		r.give(principal)
		return err
	}
	if err := r.bytes.Acquire(ctx, min(size, r.maxBytes)); err != nil {
		r.appends.Release(1)
		r.give(principal)
		return err
	}
	return nil
}

// give gives back principal's share of one append and wakes the streams
// waiting for theirs, if any (the common case, none, costs an atomic load).
func (r *shared) give(principal string) {
	r.shares.Give(principal, 1)
	if r.waiters.Load() > 0 {
		r.mu.Lock()
		close(r.wake)
		r.wake = make(chan struct{})
		r.mu.Unlock()
	}
}

// release gives back what acquire took for principal, once the append's
// outcome is decided.
func (r *shared) release(principal string, size int64) {
	r.give(principal)
	r.bytes.Release(min(size, r.maxBytes))
	r.appends.Release(1)
}

// next waits for a stream's next job, or returns nil, ending the worker,
// when the jobs are closed or when the node already keeps maxIdle idle
// workers: a stream's workers would otherwise stay, one per append of its
// peak, until the stream ends.
func (w *workers) next() func() {
	if w.shared.idle.Add(1) > w.shared.maxIdle {
		w.shared.idle.Add(-1)
		return nil
	}
	job := <-w.jobs
	w.shared.idle.Add(-1)
	return job
}

// errStalled ends a stream whose client stopped reading its outcomes. The
// appends it took and did not answer may or may not have been stored, as
// for any stream that breaks: a retry with the same message ids is safe.
func errStalled(l Limits) error {
	return errs.ResourceExhausted("this stream's outcomes were not read for %v: the node stopped serving it; "+
		"appends it did not answer may have been stored, retry them with the same message ids on a stream that is read", l.SendTimeout)
}
