package persistence

import (
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// Client names and times (issue 18): a session's client key, unique in its
// namespace; a message's event time, the client's, stored beside
// created_at (0 when the client gave none) and filtered on by reads.

// ClientKeyTaken refuses a session whose client key another session of
// its namespace holds: ALREADY_EXISTS.
func ClientKeyTaken(namespace, key string) error {
	return errs.AlreadyExists("namespace %q: client key %q names another session", namespace, key)
}

// EventNanos is a message's event time as stored: 0 when it has none. The
// time was checked by MessageNanos.
func EventNanos(m *sessionv1.Message) int64 { return CheckedNanos(m.GetEventTime()) }

// ExpiryNanos is a session's expires_at as stored: 0 when it has none.
func ExpiryNanos(s *sessionv1.Session) (int64, error) {
	if s.GetExpiresAt() == nil {
		return 0, nil
	}
	n, err := StoredNanos("expires_at", s.GetExpiresAt())
	return n, Of("session", s.GetSessionId(), err)
}
