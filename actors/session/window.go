package session

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// maxAppendWindow bounds how long a session holds its next append write
// for the callers its last one answered.
const maxAppendWindow = 2 * time.Millisecond

// minAppendWindow is the shortest hold worth a timer.
const minAppendWindow = 50 * time.Microsecond

// appendWindow is the session's own commit window. A session has at most
// one write in flight, so while it commits the appends of one group of
// callers the others queue; started at once after the commit, the next
// write would carry only those, and the callers split into two cohorts
// that alternate, each write carrying half of them and paying a whole
// transaction (issue 17's W2: 16 callers on one session, 8 appends per
// transaction). So after an append write committed, the next one waits
// until as many appends are queued as were carried plus queued at the
// commit — the callers just answered coming back — or until the window
// closes: at most maxAppendWindow and at most as long as the last write
// took. A lone caller never waits (it is all the session expects).
//
// Invariants: a window opens at most once per committed append write, never
// while passivating; gen tells the open window's timer from those of
// windows that closed early.
type appendWindow struct {
	carried int           // appends of the write in flight; 0: none or not appends
	sent    time.Time     // when that write was submitted
	expect  int           // appends awaited for the next write; 0: none
	last    time.Duration // how long the last append write took
	open    bool
	expired bool
	gen     uint64
}

// appendWindowClosed is the timer of window gen.
type appendWindowClosed struct{ gen uint64 }

// started records an append write of n appends.
func (w *appendWindow) started(n int) { w.carried, w.sent = n, time.Now() }

// finished resets the window after the write in flight was answered, with
// queued requests waiting.
func (w *appendWindow) finished(queued int, committed bool) {
	if w.carried > 0 && committed {
		w.expect, w.last = w.carried+queued, time.Since(w.sent)
	} else {
		w.expect = 0
	}
	w.carried, w.expired, w.open = 0, false, false
}

// hold decides whether the next append write, with queued requests
// waiting, waits for more; it returns open > 0 when a window opens now, for
// that long: the caller starts its timer.
func (w *appendWindow) hold(queued int, passivating bool) (wait bool, open time.Duration) {
	want := queued < w.expect && !w.expired && !passivating && queued < maxTurnsPerWrite
	if w.open {
		if !want { // every expected caller came back, or passivation began
			w.open, w.expect = false, 0
		}
		return want, 0
	}
	if !want {
		return false, 0
	}
	d := min(maxAppendWindow, w.last)
	if d < minAppendWindow {
		return false, 0
	}
	w.open = true
	w.gen++
	return true, d
}

// close ends window gen when its timer fires; false when that window had
// closed early already.
func (w *appendWindow) close(gen uint64) bool {
	if gen != w.gen || !w.open {
		return false
	}
	w.open, w.expect, w.expired = false, 0, true
	return true
}

// holdAppends reports whether the next append write waits for more
// callers, starting the window's timer when one opens.
func (o *owner) holdAppends(ctx actor.Context) bool {
	wait, d := o.win.hold(len(o.queue), o.passivating)
	if d > 0 {
		gen, self, root := o.win.gen, ctx.Self(), ctx.ActorSystem().Root
		time.AfterFunc(d, func() { root.Send(self, &appendWindowClosed{gen: gen}) })
	}
	return wait
}

// closeAppendWindow starts what is queued when the open window's timer
// fires.
func (o *owner) closeAppendWindow(ctx actor.Context, m *appendWindowClosed) {
	if o.win.close(m.gen) {
		o.pump(ctx)
	}
}
