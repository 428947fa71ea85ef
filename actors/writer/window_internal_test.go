package writer

import (
	"testing"
	"time"
)

const txTime = 4 * time.Millisecond

func TestWindowWaitsForTheAnsweredSenders(t *testing.T) {
	var win window
	win.committed(31, 31*300, 33, txTime) // 31 answered, 33 queued meanwhile
	wait, d := win.hold(33, false, false, time.Hour)
	if !wait || d != txTime {
		t.Fatalf("hold with 33 of 64 queued = %v, %v; want to wait as long as the last transaction took", wait, d)
	}
	if wait, d := win.hold(50, false, false, time.Hour); !wait || d != 0 {
		t.Fatalf("hold while open = %v, %v; want to keep waiting, no second timer", wait, d)
	}
	gen := win.gen
	if wait, _ := win.hold(64, false, false, time.Hour); wait {
		t.Fatal("all 64 expected are queued: the batch must go")
	}
	if win.close(gen, 64) {
		t.Fatal("the timer of a window that closed early must do nothing")
	}
}

func TestWindowTimerReleasesTheBatch(t *testing.T) {
	var win window
	win.committed(10, 10*300, 0, txTime)
	wait, d := win.hold(3, false, false, 200*time.Microsecond)
	if !wait || d != 200*time.Microsecond {
		t.Fatalf("hold = %v, %v; want CommitWindow (the smaller bound)", wait, d)
	}
	if !win.close(win.gen, 3) {
		t.Fatal("the open window's timer must close it")
	}
	if wait, d := win.hold(3, false, false, time.Hour); wait || d != 0 {
		t.Fatalf("after the timer: hold = %v, %v; want the batch to go, no new window before the next commit", wait, d)
	}
}

func TestWindowNeverHolds(t *testing.T) {
	cases := []struct {
		name     string
		setup    func(*window)
		queued   int
		full     bool
		draining bool
		bound    time.Duration
	}{
		{"single sender: all it expects is there", func(w *window) { w.committed(1, 300, 0, txTime) }, 1, false, false, time.Hour},
		{"more queued than expected", func(w *window) { w.committed(4, 1200, 2, txTime) }, 9, false, false, time.Hour},
		{"before any commit", func(*window) {}, 1, false, false, time.Hour},
		{"after a rollback", func(w *window) { w.committed(8, 2400, 0, txTime); w.failed() }, 1, false, false, time.Hour},
		{"a full batch is queued", func(w *window) { w.committed(8, 2400, 0, txTime) }, 1, true, false, time.Hour},
		{"draining", func(w *window) { w.committed(8, 2400, 0, txTime) }, 1, false, true, time.Hour},
		{"disabled (negative CommitWindow)", func(w *window) { w.committed(8, 2400, 0, txTime) }, 1, false, false, -1},
		{"last transaction large enough", func(w *window) { w.committed(8, windowBatchBytes, 0, txTime) }, 1, false, false, time.Hour},
		{"last transaction too short for a timer", func(w *window) { w.committed(8, 2400, 0, 40*time.Microsecond) }, 1, false, false, time.Hour},
	}
	for _, c := range cases {
		var win window
		c.setup(&win)
		if wait, d := win.hold(c.queued, c.full, c.draining, c.bound); wait || d != 0 || win.open {
			t.Errorf("%s: hold = %v, %v", c.name, wait, d)
		}
	}
}

// A drain that begins while a window is open releases the batch at once.
func TestWindowClosesForADrain(t *testing.T) {
	var win window
	win.committed(8, 2400, 0, txTime)
	if wait, _ := win.hold(2, false, false, time.Hour); !wait {
		t.Fatal("want the window open")
	}
	if wait, _ := win.hold(2, false, true, time.Hour); wait || win.open {
		t.Fatal("a drain must close the window")
	}
}

// A window whose timer runs out halves the next one (down to a sixteenth);
// one that closes early, or is too short to open, lets it grow back.
func TestWindowAdaptsToLateSenders(t *testing.T) {
	var win window
	late := func(want time.Duration) {
		t.Helper()
		win.committed(8, 2400, 0, txTime)
		if _, d := win.hold(1, false, false, time.Hour); d != want {
			t.Fatalf("window %v, want %v", d, want)
		}
		win.close(win.gen, 1)
	}
	late(txTime)
	late(txTime / 2)
	late(txTime / 4)
	late(txTime / 8)
	late(txTime / 16)
	late(txTime / 16) // a sixteenth at most

	// The senders come back in time: the next window is twice as long.
	win.committed(8, 2400, 0, txTime)
	if _, d := win.hold(1, false, false, time.Hour); d != txTime/16 {
		t.Fatalf("window %v", d)
	}
	if wait, _ := win.hold(8, false, false, time.Hour); wait {
		t.Fatal("all expected arrived: the batch must go")
	}
	win.committed(8, 2400, 0, txTime)
	if _, d := win.hold(1, false, false, time.Hour); d != txTime/8 {
		t.Fatalf("window %v after one that closed early, want %v (twice the last)", d, txTime/8)
	}

	// Too short to open: each such commit lets the window grow, so
	// it opens again once it is long enough.
	win = window{shrink: maxShrink}
	short := 100 * time.Microsecond
	opened := 0
	for range 4 {
		win.committed(8, 2400, 0, short)
		if wait, _ := win.hold(1, false, false, time.Hour); wait {
			opened++
			win.close(win.gen, 1)
		}
	}
	if opened != 1 {
		t.Fatalf("window opened %d times in four commits, want once (at 100µs/2)", opened)
	}
}

// Senders slower to come back than a transaction takes (gRPC clients):
// a window whose timer runs out while they are arriving doubles the next,
// up to CommitWindow, and one that then closes early keeps that length.
func TestWindowGrowsForSlowSenders(t *testing.T) {
	var win window
	bound := 4 * txTime
	slow := func(want time.Duration) {
		t.Helper()
		win.committed(32, 32*300, 32, txTime) // 64 expected
		if _, d := win.hold(32, false, false, bound); d != want {
			t.Fatalf("window %v, want %v", d, want)
		}
		win.close(win.gen, 50) // 18 more arrived, not all 64
	}
	slow(txTime)
	slow(2 * txTime)
	slow(4 * txTime)
	slow(bound) // CommitWindow at most

	win.committed(32, 32*300, 32, txTime)
	if _, d := win.hold(32, false, false, bound); d != bound {
		t.Fatalf("window %v, want %v", d, bound)
	}
	if wait, _ := win.hold(64, false, false, bound); wait {
		t.Fatal("all 64 expected arrived: the batch must go")
	}
	win.committed(64, 64*300, 0, txTime)
	if _, d := win.hold(32, false, false, bound); d != bound {
		t.Fatalf("window %v after one that closed early, want it kept at %v", d, bound)
	}

	// Nobody came back during the window: it shrinks again.
	win.close(win.gen, 32)
	win.committed(32, 32*300, 0, txTime)
	if _, d := win.hold(1, false, false, bound); d != 2*txTime {
		t.Fatalf("window %v after one nobody came back in, want %v", d, 2*txTime)
	}
}

// A trickle of other senders during the window is not the answered ones
// coming back: the window shrinks, not grows, so a light load is not held
// for the whole CommitWindow at every commit.
func TestWindowShrinksForATrickle(t *testing.T) {
	var win window
	win.committed(32, 32*300, 0, txTime) // 32 expected
	if _, d := win.hold(1, false, false, time.Hour); d != txTime {
		t.Fatalf("window %v, want %v", d, txTime)
	}
	win.close(win.gen, 3) // 2 of the 31 missing came
	win.committed(32, 32*300, 0, txTime)
	if _, d := win.hold(1, false, false, time.Hour); d != txTime/2 {
		t.Fatalf("window %v after a trickle, want %v", d, txTime/2)
	}
}
