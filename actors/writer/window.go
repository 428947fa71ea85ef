package writer

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

const (
	// minCommitWindow is the shortest wait worth a timer.
	minCommitWindow = 50 * time.Microsecond
	// windowBatchBytes: a transaction carrying this much amortizes its
	// commit; waiting to make the next one larger would only idle the
	// writer (in node bench's S=64×C=64 appends it cost 5–8%).
	windowBatchBytes = 64 << 10
)

// window is the writer's group-commit window. Senders with one command in
// flight (a session actor, a sync Record caller) send their next one as
// soon as they are answered. Started at once, the next transaction would
// carry only what arrived while the last one ran: the senders split into
// two cohorts that alternate, each transaction carrying half of them and
// paying a whole commit (with synchronous=FULL, an fsync). So after a
// commit of a small transaction the writer holds the next batch until the
// commands it expects have arrived — as many as the last transaction
// carried, plus those that were queued when it committed — or until the
// window closes.
//
// The window is as long as the last transaction took (within CommitWindow):
// holding costs the held commands at most one more transaction's time, and
// where the senders come back slowly — session actors of a node whose CPU
// goes to serving gRPC, each resending only after it answered its own
// callers — waiting that long lets each commit carry twice or more the
// commands, and a commit has a fixed cost (node bench round 4: over gRPC,
// transactions of ~60 appends became ~100, for 8–10% less CPU per append;
// with a quarter of the Apply time the window expired and shrank away).
//
// Senders that come back more slowly than a transaction takes — those
// behind a network hop: gRPC clients, whose answers go out through the
// node's stream, their process and the next request's way back — would
// find a window of the Apply time closed every time, the writer back to
// two cohorts of half the callers each (node bench W1 over gRPC: 30
// appends per commit against 60 embedded). So a window whose timer runs
// out while the expected commands were still arriving (at least half of
// those it was missing came while it was open) makes the next one longer,
// up to CommitWindow; one that saw fewer come makes it shorter. A grown
// window may hold the commands already queued for up to CommitWindow
// rather than one transaction's time; it does so only while the senders
// it waits for keep coming back, and closes as soon as they have.
//
// Invariants: a batch is held only while open; a window opens at most once
// per commit, only after a transaction of less than windowBatchBytes, for
// at most min(Config.CommitWindow, the last transaction's Apply time
// halved shrink times — doubled -shrink times when shrink is negative),
// and never while draining or once a full batch is queued; gen tells the
// open window's timer from those of windows that closed early. A single
// sender never waits: it is all the writer expects.
type window struct {
	expect  int           // commands awaited for the next batch; 0: none
	last    time.Duration // Apply time of the last committed transaction
	open    bool
	expired bool // the window of this commit has closed: no other opens
	gen     uint64
	// shrink halves the window that many times (-maxShrink..maxShrink;
	// negative: doubles it): it grows when a window's timer ran out
	// before the expected senders came back (waiting longer did not
	// pay), and falls when the window was too short to open, so it
	// probes again, or when its timer ran out while they were still
	// coming back (waiting longer would have paid); when they came back
	// in time it falls only to 0.
	shrink int
	// opened is how many commands were queued when the window opened;
	// capped, that it opened for CommitWindow (growing it would not
	// lengthen it).
	opened int
	capped bool
}

const maxShrink = 4

// windowClosed is the timer of window gen.
type windowClosed struct{ gen uint64 }

// committed resets the window after a transaction of commands (and bytes)
// committed in dur, with queued commands waiting; failed clears it (after a
// rollback the backoff decides when to go on).
func (win *window) committed(commands, bytes, queued int, dur time.Duration) {
	win.expect, win.last, win.expired = commands+queued, dur, false
	if bytes >= windowBatchBytes {
		win.expect = 0
	}
}

func (win *window) failed() { win.expect = 0 }

// hold decides whether the next batch, with queued commands waiting, waits
// for more; full says the queue holds a batch's worth. It returns open > 0
// when a window opens now, for that long: the caller starts its timer.
func (win *window) hold(queued int, full, draining bool, bound time.Duration) (wait bool, open time.Duration) {
	want := queued < win.expect && !full && !draining && !win.expired
	if win.open {
		if !want { // everything expected arrived, or a drain began
			win.open, win.expect = false, 0
			win.unshrink()
		}
		return want, 0
	}
	if !want {
		return false, 0
	}
	d := win.last >> max(win.shrink, 0) << max(-win.shrink, 0)
	d = min(bound, d)
	if d < minCommitWindow {
		win.unshrink()
		return false, 0
	}
	win.open, win.opened, win.capped = true, queued, d == bound
	win.gen++
	return true, d
}

// unshrink lets a shrunk window grow back by one step; one grown by late
// senders stays so (it closes as soon as they are back, so its length costs
// nothing while they come).
func (win *window) unshrink() {
	if win.shrink > 0 {
		win.shrink--
	}
}

// close ends window gen when its timer fires, with queued commands
// waiting; false when that window had closed early already.
func (win *window) close(gen uint64, queued int) bool {
	if gen != win.gen || !win.open {
		return false
	}
	// Coming back: at least half of the commands it was missing when it
	// opened arrived while it was open. A trickle of other senders is
	// not: for it, a longer window would only hold the batch longer.
	missing, came := win.expect-win.opened, queued-win.opened
	coming := came > 0 && 2*came >= missing
	win.open, win.expect, win.expired = false, 0, true
	switch {
	case coming && win.capped: // as long as it may be already
	case coming:
		win.shrink = max(win.shrink-1, -maxShrink)
	default:
		win.shrink = min(win.shrink+1, maxShrink)
	}
	return true
}

// hold reports whether the writer holds the next batch, opening the
// window's timer when one opens.
func (w *committer) hold(ctx actor.Context) bool {
	wait, d := w.win.hold(w.cmds, w.cmds >= w.cfg.MaxBatchCommands, w.draining, w.cfg.CommitWindow)
	if d > 0 {
		gen, self, root := w.win.gen, ctx.Self(), ctx.ActorSystem().Root
		time.AfterFunc(d, func() { root.Send(self, &windowClosed{gen: gen}) })
	}
	return wait
}

// closeWindow starts what is queued when the open window's timer fires.
func (w *committer) closeWindow(ctx actor.Context, m *windowClosed) {
	if w.win.close(m.gen, w.cmds) {
		w.kick(ctx)
	}
}
