package postgres

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Times are stored as unix nanoseconds; 0 means unset.

func tsNanos(ts *timestamppb.Timestamp) int64 {
	if ts == nil {
		return 0
	}
	return ts.AsTime().UnixNano()
}

func timeNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// stamp converts stored nanoseconds back; 0 gives nil (unset).
func stamp(n int64) *timestamppb.Timestamp {
	if n == 0 {
		return nil
	}
	sec, nsec := n/1e9, n%1e9
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	return &timestamppb.Timestamp{Seconds: sec, Nanos: int32(nsec)}
}

// clampLimit applies the Reader's limit rule: 0 means 100, else 1..1000.
func clampLimit(n int) int {
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

func orEmptyObject(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}
