package lifecycle

import (
	"testing"
	"time"
)

// The commit window's decisions, one at a time (the scripts in
// testdata/window show them in the kernel's protocol). Rewritten for the
// kernel from the session actor's own window tests.

const testMaxN = 1024

// Sixteen callers, half of them answered by a write of 8 while the other
// 8 queued: the next write waits for the 8 answered ones, without a second
// timer while it waits, and goes once all 16 are queued.
func TestWindowWaitsForTheAnsweredHalf(t *testing.T) {
	var w window
	w.committed(8, 8, time.Millisecond, 2*time.Millisecond)
	wait, h := w.holds(8, testMaxN, true, false)
	if !wait || h.For != time.Millisecond || h.Gen == 0 {
		t.Fatalf("holds(8 of 16) = %v, %+v; want a window of 1ms", wait, h)
	}
	if wait, h := w.holds(12, testMaxN, true, false); !wait || h.For != 0 {
		t.Fatalf("holds(12 of 16), window open = %v, %+v; want to wait on the same timer", wait, h)
	}
	if wait, _ := w.holds(16, testMaxN, true, false); wait {
		t.Fatal("all 16 queued: still waiting")
	}
	if w.open || w.expect != 0 {
		t.Fatalf("window still open once everyone came back: %+v", w)
	}
	if w.closed(h.Gen) {
		t.Fatal("the timer of a window that closed early closed it again")
	}
}

// The window lasts as long as the write took, at most the domain's bound.
func TestWindowLength(t *testing.T) {
	var w window
	w.committed(8, 8, 30*time.Millisecond, 2*time.Millisecond)
	if _, h := w.holds(1, testMaxN, true, false); h.For != 2*time.Millisecond {
		t.Fatalf("a 30ms write opened a window of %v; want the 2ms bound", h.For)
	}
}

// A lone caller never waits: it is all the owner expects.
func TestWindowLoneCaller(t *testing.T) {
	var w window
	w.committed(1, 0, time.Millisecond, 2*time.Millisecond)
	if wait, _ := w.holds(1, testMaxN, true, false); wait {
		t.Fatal("a lone caller was held")
	}
}

// The timer closes the window; until the next commit no other opens, and
// a timer of another generation changes nothing.
func TestWindowTimer(t *testing.T) {
	var w window
	w.committed(8, 8, time.Millisecond, 2*time.Millisecond)
	_, h := w.holds(8, testMaxN, true, false)
	if w.closed(h.Gen + 1) {
		t.Fatal("a timer of another window closed this one")
	}
	if !w.closed(h.Gen) {
		t.Fatal("the window's own timer did not close it")
	}
	if wait, _ := w.holds(9, testMaxN, true, false); wait {
		t.Fatal("a second window opened after the first expired, before the next commit")
	}
	if w.closed(h.Gen) {
		t.Fatal("a closed window closed twice")
	}
	w.committed(9, 7, time.Millisecond, 2*time.Millisecond)
	if wait, h2 := w.holds(7, testMaxN, true, false); !wait || h2.Gen != h.Gen+1 {
		t.Fatalf("after the next commit: holds = %v, %+v; want a window of the next generation", wait, h2)
	}
}

// No window after a failed write or one that did not opt in, none while
// passivating, none for a run that cannot grow or is full, none shorter
// than a timer is worth.
func TestWindowDoesNotOpen(t *testing.T) {
	cases := []struct {
		name                  string
		carried, queued       int
		took, max             time.Duration
		n, maxN               int
		growable, passivating bool
	}{
		{"failed write", 0, 8, time.Millisecond, 2 * time.Millisecond, 8, testMaxN, true, false},
		{"not opted in", 8, 8, time.Millisecond, 0, 8, testMaxN, true, false},
		{"passivating", 8, 8, time.Millisecond, 2 * time.Millisecond, 8, testMaxN, true, true},
		{"run cannot grow", 8, 8, time.Millisecond, 2 * time.Millisecond, 8, testMaxN, false, false},
		{"run is full", 8, 8, time.Millisecond, 2 * time.Millisecond, 8, 8, true, false},
		{"too short", 8, 8, MinWindow / 2, 2 * time.Millisecond, 8, testMaxN, true, false},
	}
	for _, c := range cases {
		var w window
		w.committed(c.carried, c.queued, c.took, c.max)
		if wait, h := w.holds(c.n, c.maxN, c.growable, c.passivating); wait || h.For != 0 {
			t.Errorf("%s: holds = %v, %+v; want the write to start", c.name, wait, h)
		}
	}
}

// Passivation beginning while a window is open closes it.
func TestWindowPassivationClosesIt(t *testing.T) {
	var w window
	w.committed(8, 8, time.Millisecond, 2*time.Millisecond)
	if wait, _ := w.holds(8, testMaxN, true, false); !wait {
		t.Fatal("no window opened")
	}
	if wait, _ := w.holds(8, testMaxN, true, true); wait || w.open {
		t.Fatalf("passivating with the window open: wait=%v open=%v", wait, w.open)
	}
}
