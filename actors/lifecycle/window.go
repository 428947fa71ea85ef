package lifecycle

import "time"

// MinWindow is the shortest commit window worth a timer: a write that
// committed faster than this is not waited for.
const MinWindow = 50 * time.Microsecond

// Hold is the effect of a commit window opening: the next write waits;
// the shell starts a timer of For and steps WindowClosed(Gen) when it
// fires.
type Hold struct {
	Gen uint64
	For time.Duration
}

// window is the kernel's commit window (ported from the session actor's
// own). An owner has one write in flight, so while it commits the
// requests of one group of closed-loop callers the others queue; started
// at once after the commit, the next write carries only those, and the
// callers split into two cohorts that alternate, each paying a whole
// transaction for half of them. So after a write that opted in
// (Write.Window) committed, the next write waits until its run has as
// many requests as that write carried plus those queued at its commit —
// the callers just answered coming back — or until the window's timer
// fires: at most Write.Window, and at most as long as the write took. A
// lone caller never waits (it is all the owner expects).
//
// Invariants: at most one window per committed write, none after a
// failed or stale one, none while passivating; a window holds only a run
// that more arrivals could grow (its head shares writes, the queue ended
// it, the domain's limits did not); gen tells the open window's timer
// from those of windows that closed early.
type window struct {
	expect  int           // requests awaited in the next run; 0: none
	hold    time.Duration // how long the next write may wait
	open    bool          // the timer of window gen runs
	expired bool          // the timer fired since the last commit
	gen     uint64
}

// committed resets the window after the write in flight was answered:
// carried requests rode in it (0: it failed, or did not opt in), queued
// wait behind it, took is how long it was in flight, max its Write.Window.
func (w *window) committed(carried, queued int, took, max time.Duration) {
	w.open, w.expired, w.expect = false, false, 0
	if carried > 0 && max > 0 {
		w.expect, w.hold = carried+queued, min(max, took)
	}
}

// holds decides whether the next write, whose run is n requests (growable:
// more arrivals would join it), waits; it returns a Hold with For > 0
// when a window opens now.
func (w *window) holds(n, maxN int, growable, passivating bool) (bool, Hold) {
	want := growable && n < w.expect && n < maxN && !w.expired && !passivating
	if w.open {
		if !want { // every expected caller came back, or passivation began
			w.open, w.expect = false, 0
		}
		return want, Hold{}
	}
	if !want || w.hold < MinWindow {
		return false, Hold{}
	}
	w.open = true
	w.gen++
	return true, Hold{Gen: w.gen, For: w.hold}
}

// closed ends window gen when its timer fired; false when that window
// had closed already (a stale timer).
func (w *window) closed(gen uint64) bool {
	if gen != w.gen || !w.open {
		return false
	}
	w.open, w.expect, w.expired = false, 0, true
	return true
}
