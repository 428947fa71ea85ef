package cluster

import (
	"errors"
	"testing"
	"time"
)

func TestFailover(t *testing.T) {
	f := NewFailover()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	down := errors.New("unavailable")

	f.Append("a", down, at(0)) // before any kill: not an outage
	f.Append("a", nil, at(1))
	f.Killed(at(100))
	f.Append("a", down, at(150))
	f.Append("a", down, at(400)) // still the same outage
	f.Append("b", nil, at(200))  // never failed: no sample
	f.Append("a", nil, at(900))  // 800ms after the kill
	f.Append("c", down, at(300))
	f.Killed(at(1000))
	f.Append("c", nil, at(1100)) // outage began before the second kill: 1000ms
	f.Append("d", down, at(1200))
	f.Append("d", nil, at(1300)) // 300ms
	f.Append("e", down, at(1400))

	s := f.Stats()
	want := FailoverStats{N: 3, P50: 800 * time.Millisecond, Max: 1000 * time.Millisecond, Open: 1}
	if s != want {
		t.Fatalf("Stats = %+v, want %+v", s, want)
	}
	if got := NewFailover().Stats(); got != (FailoverStats{}) {
		t.Fatalf("empty Stats = %+v", got)
	}
}
