package feed

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// Defaults for Config's zero fields.
const (
	DefaultChangeRingBytes  = 4 << 20
	DefaultSessionRingBytes = 256 << 10
)

// Config tunes a Hub. The zero value is usable.
type Config struct {
	// PollInterval, when positive, makes the hub also read the store at
	// this interval, for commits it is not told about: those of other
	// cluster members sharing the database. Zero: only the local writer's
	// OnCommit wakes it (one node owns the database).
	PollInterval time.Duration
	// ChangeRingBytes bounds the recent audit entries the hub keeps for
	// live change tails; SessionRingBytes the recent messages kept per
	// tailed session. A tail behind the ring reads the store instead.
	ChangeRingBytes  int
	SessionRingBytes int
	// Logger reports failed store reads; nil means slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.ChangeRingBytes <= 0 {
		c.ChangeRingBytes = DefaultChangeRingBytes
	}
	if c.SessionRingBytes <= 0 {
		c.SessionRingBytes = DefaultSessionRingBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Hub serves the live feeds of one store. One goroutine (run) reads what
// was committed, once per wake-up, into rings: the recent audit entries,
// and the recent messages of each tailed session. Tails read from a ring
// when their cursor lies inside it and from the store when it lies before
// it; each keeps its own cursor (a position or a sequence), so it delivers
// everything after it exactly once and in order whichever source it reads,
// and a tail that stops reading holds nothing of the hub and slows nobody.
//
// Invariants (under mu): a ring holds, without a gap, everything committed
// in its range (start, end], read in commit (position or sequence) order;
// it only grows at its end and is cut only at its start; its changed
// channel is closed and replaced whenever end or its terminal state moves,
// which is how waiting tails are woken.
type Hub struct {
	r   persistence.Reader
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	changes  changeRing
	sessions map[string]*sessionRing
	dirty    map[string]bool // tailed sessions named by commits since the last read
	audit    bool            // a commit wrote audit entries since the last read
	stopping bool
	closed   bool // the final read is done: tails at a ring's end end
	tails    int
	idle     chan struct{} // closed when tails drops to 0 while closing

	wake chan struct{} // capacity 1: a pending wake-up
	stop chan struct{}
	done chan struct{}
	kill chan struct{} // closed when Close gives up waiting for tails
}

// New starts a hub reading r. Wire its OnCommit into the writer and call
// Close before closing the store.
func New(r persistence.Reader, cfg Config) *Hub {
	cfg = cfg.withDefaults()
	h := &Hub{
		r: r, cfg: cfg, log: cfg.Logger,
		sessions: map[string]*sessionRing{},
		dirty:    map[string]bool{},
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		kill:     make(chan struct{}),
	}
	h.changes.changed = make(chan struct{})
	go h.run()
	return h
}

// OnCommit is the writer's hook: it is called after each transaction
// committed, with its commands and their results. It asks each command
// what it wrote (Command.Touches, persistence.Touch) and each result what
// it rewound (Result.Rewound) rather than telling commands apart by type:
// the session whose tails to wake, wrapped in an activation or not, so a
// tail learns of a cold owner's first write from that write's commit
// (issue 27), whether the audit chain changed, which wakes the change
// tails, and a replaced suffix, which its ring learns here, before the
// replacement is answered (sessionRing.rewind). A truncation wakes tails
// too; they learn of it from what they read (a first message past their
// cursor is reported as a Truncated range). It never blocks (a map lookup
// per session command and a non-blocking send), so the writer is not
// slowed by the number or the speed of the tails.
func (h *Hub) OnCommit(cmds []persistence.Command, results []persistence.Result) {
	h.mu.Lock()
	for i, c := range cmds {
		t := c.Touches()
		if s := h.sessions[t.Session]; t.Session != "" && s != nil {
			h.dirty[t.Session] = true
			if i < len(results) {
				if rw, ok := results[i].Rewound(); ok {
					s.rewind(rw)
				}
			}
		}
		if t.AnySession {
			for id := range h.sessions {
				h.dirty[id] = true
			}
		}
		if t.WritesAudit() {
			h.audit = true
		}
	}
	h.mu.Unlock()
	h.signal()
}

func (h *Hub) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// run is the hub's reading goroutine.
func (h *Hub) run() {
	defer close(h.done)
	var tick <-chan time.Time
	if h.cfg.PollInterval > 0 {
		t := time.NewTicker(h.cfg.PollInterval)
		defer t.Stop()
		tick = t.C
	}
	ctx := context.Background()
	for {
		final := false
		poll := false
		select {
		case <-h.wake:
		case <-tick:
			poll = true
		case <-h.stop:
			final = true
		}
		// A poll reads every ring a tail waits on: commits of other
		// members are not named by a hook. The final read reads every
		// ring, so that a tail reaching a ring's end after the close has
		// truly seen everything.
		h.read(ctx, poll, final)
		if final {
			h.mu.Lock()
			h.closed = true
			h.changes.broadcast()
			for _, s := range h.sessions {
				s.broadcast()
			}
			h.mu.Unlock()
			return
		}
	}
}

// read brings rings up to the store: those a commit changed (or every
// one, on a poll) and a tail waits on at its end. A ring no tail waits on
// stays stale, marked, until one does (its tails are reading the ring or
// the store, or have stopped reading): so a subscriber that stopped
// reading costs the hub, and the writer it shares the machine with,
// nothing. Invalid rings and, with final, all rings are read.
func (h *Hub) read(ctx context.Context, all, final bool) {
	h.mu.Lock()
	c := &h.changes
	stale := h.audit || all
	readChanges := c.tails > 0 && (!c.valid || final || stale && c.waiting > 0)
	h.audit = stale && !readChanges
	var ids []string
	for id, s := range h.sessions {
		stale := h.dirty[id] || all
		if !s.valid || final || stale && s.waiting > 0 {
			ids = append(ids, id)
			delete(h.dirty, id)
		} else if stale {
			h.dirty[id] = true
		}
	}
	h.mu.Unlock()
	if readChanges {
		if err := h.readChanges(ctx); err != nil {
			h.retryLater("change feed", err)
		}
	}
	for _, id := range ids {
		if err := h.readSession(ctx, id); err != nil {
			h.mu.Lock()
			h.dirty[id] = true
			h.mu.Unlock()
			h.retryLater("session "+id, err)
		}
	}
}

// retryLater logs a failed read and wakes the hub again shortly: tails
// keep waiting (or read the store themselves) meanwhile.
func (h *Hub) retryLater(what string, err error) {
	h.log.Warn("feed: store read failed; retrying", "feed", what, "err", err)
	if what == "change feed" {
		h.mu.Lock()
		h.audit = true
		h.mu.Unlock()
	}
	time.AfterFunc(50*time.Millisecond, h.signal)
}

// Tails reports the open tails (for metrics and tests).
func (h *Hub) Tails() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tails
}

// register counts a new tail; it fails once the hub is stopping.
func (h *Hub) register() error {
	if h.stopping {
		return errs.Unavailable("the node is stopping; feeds are closed")
	}
	h.tails++
	return nil
}

func (h *Hub) unregister() {
	h.tails--
	if h.tails == 0 && h.idle != nil {
		close(h.idle)
		h.idle = nil
	}
}

// Close ends the feeds: it makes a final read of everything committed
// (call it after the writer stopped, so that is everything), lets every
// tail deliver up to there and end (an ended event), and waits for the
// tails to be closed by their consumers until ctx ends; then it makes the
// remaining tails' Next fail with UNAVAILABLE. New tails are refused.
func (h *Hub) Close(ctx context.Context) {
	h.mu.Lock()
	if h.stopping {
		h.mu.Unlock()
		<-h.done
		return
	}
	h.stopping = true
	var idle chan struct{}
	if h.tails > 0 {
		idle = make(chan struct{})
		h.idle = idle
	}
	h.mu.Unlock()
	close(h.stop)
	<-h.done
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			close(h.kill)
		}
	}
}
