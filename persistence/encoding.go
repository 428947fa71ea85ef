package persistence

import (
	"math"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Helpers every store implementation shares, so that all of them store
// times and clamp limits the same way.
//
// Stores keep a time as int64 unix nanoseconds, with 0 for unset. That
// covers 1677-09-21 to 2262-04-11; Go's UnixNano wraps silently outside it.
// So there are two rules, each in one function here:
//
//   - a time that is stored goes through StoredNanos (or StoredTimeNanos):
//     it is kept exactly or refused with INVALID_ARGUMENT naming its field.
//     The two ends of the int64 range and 0 are not storable times: 0
//     means unset, and math.MinInt64 and math.MaxInt64 stand for "before
//     every stored time" and "after every stored time" in bounds;
//   - a time that bounds a query or a prune goes through BoundNanos: it is
//     never refused, but clamped to those two ends, where it still means
//     exactly what it says, because no stored time equals either end.

var (
	minStorable = time.Unix(0, math.MinInt64+1)
	maxStorable = time.Unix(0, math.MaxInt64-1)
)

// StoredNanos is how a store keeps a timestamp: unix nanoseconds, 0 for
// nil (unset). A timestamp invalid as protobuf (nanos out of range, before
// year 1 or after 9999), outside minStorable..maxStorable, or exactly the
// unix epoch (which would read back as unset) is INVALID_ARGUMENT naming
// field, and must store nothing.
func StoredNanos(field string, ts *timestamppb.Timestamp) (int64, error) {
	if ts == nil {
		return 0, nil
	}
	if err := ts.CheckValid(); err != nil {
		return 0, errs.InvalidArgument("%s: %v", field, err)
	}
	return storedNanos(field, ts.AsTime())
}

// StoredTimeNanos is StoredNanos for a time.Time; the zero time is unset.
func StoredTimeNanos(field string, t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, nil
	}
	return storedNanos(field, t)
}

func storedNanos(field string, t time.Time) (int64, error) {
	if t.Before(minStorable) || t.After(maxStorable) {
		return 0, errs.InvalidArgument("%s %s is outside the storable times %s to %s",
			field, t.UTC().Format(time.RFC3339Nano), minStorable.UTC().Format(time.RFC3339Nano), maxStorable.UTC().Format(time.RFC3339Nano))
	}
	n := t.UnixNano()
	if n == 0 {
		return 0, errs.InvalidArgument("%s is exactly the unix epoch, 1970-01-01T00:00:00Z, which stores keep as \"unset\"", field)
	}
	return n, nil
}

// BoundNanos turns a bound on stored times (since, until, older than) into
// stored nanoseconds. It never fails: a bound before every storable time is
// math.MinInt64 and one after every storable time math.MaxInt64, which no
// stored time equals, so "created_at >= b" and "created_at < b" keep their
// meaning at both ends (since 1600 matches everything, until 1600 and
// older than 1600 nothing, until 3000 everything). Go's zero time is a
// bound like any other (year 1), not "missing": callers decide missing
// before, from an unset protobuf Timestamp.
func BoundNanos(t time.Time) int64 {
	switch {
	case t.Before(minStorable):
		return math.MinInt64
	case t.After(maxStorable):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// CheckedNanos is StoredNanos without the checks, for a timestamp already
// checked by it (or made by Stamp): a command's rows are checked once,
// before anything is written, and converted again per row on the insert
// path without repeating the checks. nil gives 0.
func CheckedNanos(ts *timestamppb.Timestamp) int64 {
	if ts == nil {
		return 0
	}
	return ts.GetSeconds()*1e9 + int64(ts.GetNanos())
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

// Of names the entity whose time StoredNanos refused ("message <id>
// created_at ..."); nil stays nil. Callers pass constant field names and
// add the entity only on failure, so the append path builds no names.
func Of(kind, id string, err error) error {
	if err == nil {
		return nil
	}
	return errs.InvalidArgument("%s %s %s", kind, id, errs.From(err).Msg)
}

// MessageNanos checks a message a command stores (it has an id and a
// storable created_at) and returns its created_at as stored.
func MessageNanos(m *sessionv1.Message) (int64, error) {
	switch {
	case m == nil:
		return 0, errs.InvalidArgument("message is nil")
	case m.GetMessageId() == "":
		return 0, errs.InvalidArgument("message has no message_id")
	case m.GetCreatedAt() == nil:
		return 0, errs.InvalidArgument("message %s has no created_at", m.GetMessageId())
	}
	n, err := StoredNanos("created_at", m.GetCreatedAt())
	if err == nil && m.GetEventTime() != nil {
		_, err = StoredNanos("event_time", m.GetEventTime())
	}
	return n, Of("message", m.GetMessageId(), err)
}

// SessionNanos returns a session's created_at, updated_at and closed_at as
// stored.
func SessionNanos(s *sessionv1.Session) (out [3]int64, err error) {
	for i, f := range []struct {
		name string
		ts   *timestamppb.Timestamp
	}{{"created_at", s.GetCreatedAt()}, {"updated_at", s.GetUpdatedAt()}, {"closed_at", s.GetClosedAt()}} {
		if out[i], err = StoredNanos(f.name, f.ts); err != nil {
			return out, Of("session", s.GetSessionId(), err)
		}
	}
	return out, nil
}
