package cluster

import (
	"slices"
	"sync"
	"time"
)

// Failover measures how long sessions were unavailable around member
// kills. A session is "out" from the first failed append attempt after a
// kill until its next acknowledged append; its failover sample is the time
// from that kill to the acknowledgement. Sessions that never failed after
// a kill add no sample: their owner was not on the killed member and
// their clients did not call it.
//
// It is safe for concurrent use: Append is called from the load's clients,
// Killed from the test's controlling goroutine.
//
// Invariant: out[s] is the time of the kill that preceded the first
// failure of s still unanswered by an acknowledgement; kill is the latest
// kill (zero before the first).
type Failover struct {
	mu      sync.Mutex
	kill    time.Time
	out     map[string]time.Time
	samples []time.Duration
}

// NewFailover returns a recorder with no kills yet.
func NewFailover() *Failover {
	return &Failover{out: make(map[string]time.Time)}
}

// Killed records a kill at t. Call it just before the kill: a failure
// the kill causes may reach Append before the killing call returns.
func (f *Failover) Killed(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kill = t
}

// Append records the outcome of one append attempt on session at t
// (err nil: acknowledged).
func (f *Failover) Append(session string, err error, t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kill.IsZero() {
		return
	}
	k, out := f.out[session]
	switch {
	case err != nil && !out:
		f.out[session] = f.kill
	case err == nil && out:
		f.samples = append(f.samples, t.Sub(k))
		delete(f.out, session)
	}
}

// FailoverStats summarises the samples.
type FailoverStats struct {
	N        int           // sessions × kills that had an outage
	P50, Max time.Duration // over those samples
	Open     int           // sessions failed but never acknowledged since
}

// Stats returns the figures so far.
func (f *Failover) Stats() FailoverStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := FailoverStats{N: len(f.samples), Open: len(f.out)}
	if s.N == 0 {
		return s
	}
	sorted := slices.Clone(f.samples)
	slices.Sort(sorted)
	s.P50, s.Max = sorted[(len(sorted)-1)/2], sorted[len(sorted)-1]
	return s
}
