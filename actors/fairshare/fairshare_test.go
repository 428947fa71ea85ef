package fairshare

import (
	"context"
	"testing"
)

// fakeClock is a Ledger's clock, moved by the test.
type fakeClock struct{ t int64 }

func (c *fakeClock) now() int64 { return c.t }

func newTestLedger(cap int64) (*Ledger, *fakeClock) {
	c := &fakeClock{}
	l := NewLedger(cap)
	l.now = c.now
	return l, c
}

// flood takes units of one for p until its share refuses it, and returns
// how many it took.
func flood(l *Ledger, p string, limit int) int {
	n := 0
	for n < limit && l.Take(p, 1) {
		n++
	}
	return n
}

func TestAlonePrincipalTakesTheWholeBudget(t *testing.T) {
	l, _ := newTestLedger(100)
	if got := flood(l, "a", 1000); got != 100 {
		t.Fatalf("alone, a took %d of 100", got)
	}
}

// A principal that flooded the whole budget is held to half of it from
// the moment another is refused: what it gives back goes to the other
// until both hold half.
func TestFloodingPrincipalCannotTakeAnothersShare(t *testing.T) {
	l, _ := newTestLedger(100)
	held := flood(l, "flood", 1000)
	// The global budget is full: the honest principal's request is
	// refused by it (the caller's semaphore), and says so.
	if !l.Take("honest", 1) {
		t.Fatal("a principal holding nothing was refused by its share")
	}
	l.Give("honest", 1) // the global budget had no room
	l.Refused("honest")
	if s := l.Share("flood"); s != 50 {
		t.Fatalf("flood's share with honest refused: %d, want 50", s)
	}
	// The flood's requests end and it asks again, as fast as it can:
	// every request is refused until it is under its share.
	for held > 50 {
		l.Give("flood", 1)
		held--
		if l.Take("flood", 1) {
			t.Fatalf("flood took a unit while holding %d, over its share of 50", held)
		}
	}
	if got := flood(l, "honest", 1000); got != 50 {
		t.Fatalf("honest got %d units beside the flood, want its share of 50", got)
	}
	if l.Take("flood", 1) || l.Take("honest", 1) {
		t.Fatal("a principal took more than its share")
	}
}

func TestShareIsEqualAmongThree(t *testing.T) {
	l, _ := newTestLedger(90)
	for _, p := range []string{"a", "b", "c"} {
		if !l.Take(p, 1) {
			t.Fatalf("%s refused its first unit", p)
		}
	}
	for _, p := range []string{"a", "b", "c"} {
		if got := flood(l, p, 1000) + 1; got != 30 {
			t.Fatalf("%s holds %d of 90 among three, want 30", p, got)
		}
	}
}

// A refused principal stops counting Window after its refusal, and the
// principal still using the budget gets all of it back.
func TestRefusedPrincipalStopsCountingAfterWindow(t *testing.T) {
	l, c := newTestLedger(10)
	flood(l, "a", 5)
	l.Refused("b")
	if s := l.Share("a"); s != 5 {
		t.Fatalf("share with b refused: %d, want 5", s)
	}
	c.t += int64(Window) + 1
	if s := l.Share("a"); s != 10 {
		t.Fatalf("share after b's window: %d, want 10", s)
	}
	if got := flood(l, "a", 100); got != 5 {
		t.Fatalf("a took %d more, want the 5 left", got)
	}
}

// A request larger than a share still runs when its principal holds
// nothing: the global budget alone decides it.
func TestLargeRequestOfAnIdlePrincipalIsAdmitted(t *testing.T) {
	l, _ := newTestLedger(100)
	l.Take("a", 10)
	l.Refused("c")
	if !l.Take("b", 80) {
		t.Fatal("b, holding nothing, was refused a request larger than its share")
	}
	if l.Take("b", 1) {
		t.Fatal("b took more while over its share")
	}
}

func TestUnapportionedCallerIsNotCounted(t *testing.T) {
	l, _ := newTestLedger(10)
	for range 100 {
		if !l.Take("", 5) {
			t.Fatal("the unapportioned caller was refused")
		}
	}
	if s := l.Share("a"); s != 10 {
		t.Fatalf("share beside the unapportioned caller: %d, want 10", s)
	}
	l.Give("", 5)
}

func TestContextCarriesThePrincipal(t *testing.T) {
	ctx := With(context.Background(), "p")
	if From(ctx) != "p" || From(context.Background()) != "" {
		t.Fatal("the principal did not travel in the context")
	}
}

func TestGiveOfMoreThanTakenPanics(t *testing.T) {
	l, _ := newTestLedger(10)
	l.Take("a", 1)
	defer func() {
		if recover() == nil {
			t.Fatal("Give of more than was taken did not panic")
		}
	}()
	l.Give("a", 2)
}

// The hot path, once the principals' accounts exist, allocates nothing.
func TestTakeAndGiveDoNotAllocate(t *testing.T) {
	l, _ := newTestLedger(1 << 20)
	l.Take("a", 1)
	l.Give("a", 1)
	l.Take("b", 1)
	allocs := testing.AllocsPerRun(1000, func() {
		l.Take("a", 3)
		l.Take("a", 2)
		l.Give("a", 3)
		l.Give("a", 2)
	})
	if allocs != 0 {
		t.Fatalf("Take and Give allocated %.1f times per run", allocs)
	}
}

func BenchmarkTakeGive(b *testing.B) {
	l := NewLedger(1 << 30)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Take("p", 100)
			l.Give("p", 100)
		}
	})
}

// Principals that come and go leave at most maxIdle idle accounts behind.
func TestIdleAccountsAreSwept(t *testing.T) {
	l, _ := newTestLedger(100)
	for i := range 3 * maxIdle {
		p := string(rune('a'+i%26)) + string(rune(i))
		l.Take(p, 1)
		l.Give(p, 1)
	}
	if n := len(l.users); n > maxIdle+1 {
		t.Fatalf("%d accounts kept for principals holding nothing, want at most %d", n, maxIdle+1)
	}
	if got := flood(l, "a", 1000); got != 100 {
		t.Fatalf("after the sweep, a alone took %d of 100", got)
	}
}
