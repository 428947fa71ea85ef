package adkstore

import (
	"context"
	"fmt"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence"
)

// Session is what AppendEvent takes of a version's session.Session: a
// session this service handed out wraps its *Handle[E], whose method
// handle it then has.
type Session interface{ ID() string }

// AppendEvent stores event as the session's next message through cur's
// handle (see append); cur must be a session this service returned.
// Partial events are not stored. An event without an ID gets one. What
// the store keeps and later reads return is the event without its temp:
// keys; the handle keeps them for the rest of the invocation.
func (s *Service[E]) AppendEvent(ctx context.Context, cur Session, event *E) error {
	if cur == nil {
		return fmt.Errorf("adk: session is nil")
	}
	// Another service's session (ADK's in-memory one, say) has no handle
	// to append through.
	hh, ok := cur.(interface{ handle() *Handle[E] })
	if !ok {
		return fmt.Errorf("adk: unexpected session type %T for session %q: AppendEvent takes the sessions this service returned", cur, cur.ID())
	}
	h := hh.handle()
	if event == nil {
		return fmt.Errorf("adk: event is nil")
	}
	id, partial, delta, at := s.v.Fields(event)
	if partial {
		return nil
	}
	if *id == "" {
		*id = s.v.NewID(ctx)
	}
	stored := event
	kept, had := WithoutTemp(delta)
	if had {
		stored = s.v.WithDelta(event, kept)
	}
	msg, err := s.v.Encode(stored)
	if err != nil {
		return err
	}
	return s.append(ctx, h, appendOf[E]{Message: msg, Delta: kept, FullDelta: delta, Stored: stored, Time: at})
}

// appendOf is one event to store through a handle.
type appendOf[E any] struct {
	// Message is the event without its temp: keys (EventMessage); its
	// message id is the event's ID.
	Message *sessionv1.NewMessage
	// Delta is the stored event's state delta (temp: keys removed),
	// FullDelta the event's own, which the handle takes.
	Delta, FullDelta map[string]any
	// Stored is the event as later reads return it: the one the handle
	// lists next.
	Stored *E
	// Time is the event's timestamp: the handle's last update time.
	Time time.Time
}

// append stores a.Message as the session's next message, with a.Delta
// applied in the same transaction: the session's keys to the session's
// state, app: and user: keys to the shared scopes; temp: keys are applied
// to the handle only. The append is conditional on the handle's next
// sequence, so an append through a handle that another writer overtook is
// refused with ErrStaleSession.
func (s *Service[E]) append(ctx context.Context, h *Handle[E], a appendOf[E]) error {
	d, err := splitDelta(a.Delta)
	if err != nil {
		return err
	}
	h.appendMu.Lock()
	defer h.appendMu.Unlock()
	expected := h.nextSequence()
	resp, err := s.store.Append(ctx, &sessionv1.AppendRequest{
		SessionId:            h.sid,
		Messages:             []*sessionv1.NewMessage{a.Message},
		StateDelta:           d.session,
		ScopeDeltas:          d.scopes(h.app, h.user),
		ExpectedNextSequence: &expected,
	})
	if appendErr := err; appendErr != nil {
		next, mismatch := persistence.NextSequenceOf(appendErr)
		if !mismatch {
			return s.lookupErr(h.id, appendErr)
		}
		// The session moved on. It may have moved on by this very event:
		// an earlier attempt whose answer was lost (OUTCOME_UNKNOWN)
		// committed it at the expected sequence.
		if ours, err := s.storedAt(ctx, h.sid, expected, a.Message.GetMessageId()); err != nil {
			return s.lookupErr(h.id, err)
		} else if !ours {
			return fmt.Errorf("%w: session %q: the handle was read at sequence %d, the session is at %d; get it again: %w",
				ErrStaleSession, h.id, expected, next, appendErr)
		}
		h.appended(a, expected+1)
		return nil
	}
	h.appended(a, resp.GetNextSequence())
	return nil
}

// storedAt reports whether the message at sequence seq is the event id.
func (s *Service[E]) storedAt(ctx context.Context, sid string, seq int64, id string) (bool, error) {
	resp, err := s.store.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid, FromSequence: seq, Limit: 1})
	if err != nil {
		return false, err
	}
	ms := resp.GetMessages()
	return len(ms) == 1 && ms[0].GetSequence() == seq && ms[0].GetMessageId() == id, nil
}
