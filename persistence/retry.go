package persistence

import (
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// A client-chosen message id names one message. A turn whose ids are all
// stored is a retry only if it is the same turn: the same ids in the same
// order (stored at consecutive sequences), each with the same role,
// content, metadata, event time, item key and kind. Anything else reusing a stored id is refused with
// MessageIDTaken and stores nothing; it is never acknowledged as a
// duplicate, which would drop its content silently. Stores compare only
// when an id is found stored, so the first attempt costs nothing more.

// MessageIDTaken is the refusal of a turn that reuses stored message id
// id for something other than a retry of its turn: ALREADY_EXISTS.
func MessageIDTaken(sessionID, id string) error {
	return errs.AlreadyExists("session %s: message id %s is stored with other content or in another turn; a retry must repeat its turn exactly", sessionID, id)
}

// CheckRetry returns nil when turn (every id stored) repeats the stored
// messages, stored[i] being the stored message of turn[i]'s id, and
// MessageIDTaken naming the first id that differs otherwise.
func CheckRetry(sessionID string, turn, stored []*sessionv1.Message) error {
	for i, m := range turn {
		s := stored[i]
		if s.GetRole() != m.GetRole() || s.GetContent() != m.GetContent() ||
			emptyObject(s.GetMetadataJson()) != emptyObject(m.GetMetadataJson()) ||
			CheckedNanos(s.GetEventTime()) != CheckedNanos(m.GetEventTime()) ||
			s.GetItemKey() != m.GetItemKey() || s.GetKind() != m.GetKind() ||
			(i > 0 && s.GetSequence() != stored[i-1].GetSequence()+1) {
			return MessageIDTaken(sessionID, m.GetMessageId())
		}
	}
	return nil
}

// emptyObject is how stores keep metadata: "" is "{}".
func emptyObject(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}
