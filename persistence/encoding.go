package persistence

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Helpers every store implementation shares, so that all of them store
// times and clamp limits the same way.

// UnixNanos is how stores keep a timestamp: unix nanoseconds, 0 for unset.
func UnixNanos(ts *timestamppb.Timestamp) int64 {
	if ts == nil {
		return 0
	}
	return ts.AsTime().UnixNano()
}

// TimeNanos is UnixNanos for a time.Time; the zero time is 0.
func TimeNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Stamp converts stored nanoseconds back; 0 gives nil (unset).
func Stamp(n int64) *timestamppb.Timestamp {
	if n == 0 {
		return nil
	}
	sec, nsec := n/1e9, n%1e9
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	return &timestamppb.Timestamp{Seconds: sec, Nanos: int32(nsec)}
}

// ClampLimit applies the Reader's limit rule: 0 means 100, else 1..1000.
func ClampLimit(n int) int {
	switch {
	case n == 0:
		return 100
	case n < 1:
		return 1
	case n > 1000:
		return 1000
	}
	return n
}
