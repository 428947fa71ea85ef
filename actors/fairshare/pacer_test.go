package fairshare

import (
	"context"
	"testing"
	"time"
)

func newTestPacer(rate int64, burst time.Duration) (*Pacer, *fakeClock) {
	c := &fakeClock{t: int64(time.Hour)}
	p := NewPacer(rate, burst)
	p.now = c.now
	return p, c
}

// A principal alone is never delayed, however much it is charged, and
// carries no debt into the moment another principal arrives.
func TestPacerLeavesALonePrincipalAlone(t *testing.T) {
	p, c := newTestPacer(1000, time.Millisecond)
	for range 100 {
		p.Charge("bulk", 1_000_000)
		if d := p.Delay("bulk"); d > 0 {
			t.Fatalf("alone, bulk was delayed %v", d)
		}
	}
	c.t += int64(time.Millisecond)
	p.Charge("other", 1)
	p.Charge("bulk", 1) // one unit at 500/s: 2 ms of its share
	if d := p.Delay("bulk"); d > 2*time.Millisecond {
		t.Fatalf("bulk's debt from when it was alone carried over: delayed %v", d)
	}
}

// Against another principal, a flooding one is held to half the rate:
// paying its delays, it gets through rate/2 units a second.
func TestPacerHoldsAFloodToItsShare(t *testing.T) {
	const rate = 1_000_000 // units per second
	p, c := newTestPacer(rate, time.Millisecond)
	start := c.t
	var sent int64
	for c.t-start < int64(time.Second) {
		p.Charge("honest", 10) // the other principal stays active
		p.Charge("flood", 10_000)
		sent += 10_000
		if d := p.Delay("flood"); d > 0 {
			c.t += int64(d)
		}
		if d := p.Delay("honest"); d > 0 {
			t.Fatalf("honest, far under its share, was delayed %v", d)
		}
	}
	elapsed := time.Duration(c.t - start)
	got := float64(sent) / elapsed.Seconds()
	if got < 0.45*rate || got > 0.55*rate {
		t.Fatalf("flood got %.0f units/s against another principal, want about %d", got, rate/2)
	}
}

// A principal idle for over Window stops counting: the one left is alone
// again and no longer delayed.
func TestPacerForgetsIdlePrincipals(t *testing.T) {
	p, c := newTestPacer(1000, time.Millisecond)
	p.Charge("a", 1)
	p.Charge("b", 1000)
	if p.Active() != 2 {
		t.Fatalf("active %d, want 2", p.Active())
	}
	if d := p.Delay("b"); d <= 0 {
		t.Fatalf("b, a second ahead of its share, was not delayed")
	}
	c.t += int64(Window) + int64(time.Millisecond)
	p.Charge("b", 1000)
	if n := p.Active(); n != 1 {
		t.Fatalf("active %d after a's Window passed, want 1", n)
	}
	if d := p.Delay("b"); d > 0 {
		t.Fatalf("b, alone again, was delayed %v", d)
	}
}

// A lead is at most MaxLead, and the empty principal is never paced.
func TestPacerBoundsOneWait(t *testing.T) {
	p, _ := newTestPacer(1000, time.Millisecond)
	p.Charge("a", 1)
	p.Charge("b", 1_000_000) // 2,000 s of its share
	if d := p.Delay("b"); d != MaxLead {
		t.Fatalf("delay %v, want the bound %v", d, MaxLead)
	}
	p.Charge("", 1_000_000)
	if d := p.Delay(""); d != 0 {
		t.Fatalf("the empty principal was delayed %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Wait(ctx, "b"); err == nil {
		t.Fatal("Wait on an ended context returned nil")
	}
}

// BenchmarkPacer is what pacing adds to a request of a principal alone and
// of two principals at once: a charge on receipt, the delay check and a
// charge of the answer.
func BenchmarkPacer(b *testing.B) {
	for _, tc := range []struct {
		name   string
		others int
	}{{"alone", 0}, {"contended", 1}} {
		b.Run(tc.name, func(b *testing.B) {
			p := NewPacer(1<<40, 0) // never delays: the bookkeeping alone
			for i := range tc.others {
				p.Charge(string(rune('b'+i)), 1)
			}
			b.ReportAllocs()
			for b.Loop() {
				p.Charge("a", 512+OpCost)
				_ = p.Delay("a")
				p.Charge("a", 64)
			}
		})
	}
}

// A request is not held for its own cost: DelayBefore takes the latest
// charge's share-time off, so a request larger than any wait is served
// when the principal's earlier work is paid, and the next one waits for it.
func TestPacerDelayBeforeLeavesOutTheRequestsOwnCost(t *testing.T) {
	p, _ := newTestPacer(1000, time.Millisecond) // 500 units/s each of two
	p.Charge("other", 1)
	p.Charge("big", 1000) // 2 s of its share
	if d := p.DelayBefore("big", 1000); d > 0 {
		t.Fatalf("the request's own cost held it %v", d)
	}
	if d := p.Delay("big"); d < time.Second {
		t.Fatalf("the next request waits %v, want about 2 s", d)
	}
}
