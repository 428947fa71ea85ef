package session

import (
	"context"
	"time"
)

// Test access to the service's internals.

// Activations counts session actors started since Start.
func Activations(s *Service) int64 { return s.env.owners.Activations.Load() }

// WaitNoActors returns once no session actor is alive, or ctx ended.
func WaitNoActors(ctx context.Context, s *Service) error {
	for {
		ch := s.env.owners.Live.Changed()
		if s.env.owners.Live.Count() == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// OnAccept installs the afterAccept hook; call it before the first request.
func OnAccept(s *Service, f func(sessionID string, queued int, inFlight bool)) { s.env.afterAccept = f }

// SweepStaged runs one sweep for abandoned imports now, taking imports idle
// for longer than idle as abandoned.
func SweepStaged(ctx context.Context, s *Service, idle time.Duration) error {
	return s.sweepStaged(ctx, idle)
}

// FirstSweep is closed once the background sweep at start has ended; a
// test's own sweep before that races it for the same sessions.
func FirstSweep(s *Service) <-chan struct{} { return s.firstSweep }

// SweepExpired runs one expiry sweep as of now.
func SweepExpired(ctx context.Context, s *Service, now time.Time) (int, error) {
	return s.sweepExpired(ctx, now)
}

// SetTruncateChunk sets the messages one truncation command removes; it
// returns the previous value. Not for concurrent tests.
func SetTruncateChunk(n int) int {
	old := truncateChunk
	truncateChunk = n
	return old
}
