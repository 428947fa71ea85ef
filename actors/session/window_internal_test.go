package session

import (
	"testing"
	"time"
)

// A write that carried 8 appends committed with 8 more queued (the other
// cohort): the next write waits for the 8 callers just answered, and goes
// once they are back.
func TestAppendWindowWaitsForTheAnsweredCohort(t *testing.T) {
	var w appendWindow
	w.started(8)
	w.sent = time.Now().Add(-time.Millisecond)
	w.finished(8, true)
	wait, d := w.hold(8, false)
	if !wait || d <= 0 || d > maxAppendWindow {
		t.Fatalf("hold(8 of 16) = %v, %v; want a window of (0, %v]", wait, d, maxAppendWindow)
	}
	if wait, d := w.hold(12, false); !wait || d != 0 {
		t.Fatalf("hold(12 of 16) with the window open = %v, %v; want to keep waiting, no new timer", wait, d)
	}
	if wait, _ := w.hold(16, false); wait {
		t.Fatal("all 16 back: still holding")
	}
	if w.open || w.expect != 0 {
		t.Fatalf("window not reset once everyone came back: %+v", w)
	}
}

// A lone caller never waits: it is all the session expects.
func TestAppendWindowLoneCallerNeverWaits(t *testing.T) {
	var w appendWindow
	w.started(1)
	w.sent = time.Now().Add(-time.Millisecond)
	w.finished(0, true)
	if wait, _ := w.hold(1, false); wait {
		t.Fatal("a lone caller was held")
	}
}

// The timer closes the window; the same commit opens no second one, and a
// stale timer (of a window that closed early) changes nothing.
func TestAppendWindowTimerAndStaleTimers(t *testing.T) {
	var w appendWindow
	w.started(8)
	w.sent = time.Now().Add(-time.Millisecond)
	w.finished(8, true)
	if wait, _ := w.hold(8, false); !wait {
		t.Fatal("no window opened")
	}
	gen := w.gen
	if w.close(gen + 1) {
		t.Fatal("a timer of another window closed this one")
	}
	if !w.close(gen) {
		t.Fatal("the window's own timer did not close it")
	}
	if wait, _ := w.hold(9, false); wait {
		t.Fatal("a second window opened after the first expired, before the next commit")
	}
	if w.close(gen) {
		t.Fatal("a closed window closed twice")
	}
}

// No window after a failed write, none while passivating, none shorter
// than a timer is worth.
func TestAppendWindowDoesNotOpen(t *testing.T) {
	var w appendWindow
	w.started(8)
	w.finished(8, false)
	if wait, _ := w.hold(8, false); wait {
		t.Fatal("held after a failed write")
	}
	w.started(8)
	w.sent = time.Now().Add(-time.Millisecond)
	w.finished(8, true)
	if wait, _ := w.hold(8, true); wait {
		t.Fatal("held while passivating")
	}
	w.started(8)
	w.sent = time.Now()
	w.finished(8, true)
	w.last = minAppendWindow / 2
	if wait, _ := w.hold(8, false); wait {
		t.Fatal("held for less than a timer is worth")
	}
}
