package checker

import (
	"context"
	"fmt"
	"slices"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Keyed items in the load (issue 30): batches of keyed messages, every one
// KEY_CONFLICT_KEEP_STORED, appended to sessions of their own
// (LoadConfig.KeyedSessions), as a framework stores pending writes: one
// key new to the session, and one or two from a small key space the
// clients share, so that most batches are partly stored already and two
// clients race for a key. A retry resends the same ids. The verdict
// (checkKeyed) holds the sessions to: every key acknowledged is stored
// once, as the message every answer for it named (its id and sequence,
// kept or not); nothing stored that was not sent for its key; sequences
// dense, the kept messages having consumed none.

// sharedKeys is the size of the key space the clients share per session.
const sharedKeys = 24

// KeyedAck is one acknowledged keyed batch as sent and as answered.
type KeyedAck struct {
	Session string
	Sent    []*sessionv1.NewMessage
	Got     []*sessionv1.AppendedMessage
}

// keyedLedger is the Ledger's part for keyed batches (under Ledger.mu).
type keyedLedger struct {
	sessions []string
	// sent: session → item key → the message ids sent for it.
	sent map[string]map[string][]string
	acks []KeyedAck
}

// KeyedSessionCreated records a session of the keyed batches.
func (l *Ledger) KeyedSessionCreated(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keyed.sessions = append(l.keyed.sessions, id)
}

// KeyedSessions returns the sessions of the keyed batches.
func (l *Ledger) KeyedSessions() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.keyed.sessions)
}

// KeyedSent records an attempt of a keyed batch, before it is sent.
func (l *Ledger) KeyedSent(session string, ms []*sessionv1.NewMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keyed.sent == nil {
		l.keyed.sent = map[string]map[string][]string{}
	}
	if l.keyed.sent[session] == nil {
		l.keyed.sent[session] = map[string][]string{}
	}
	for _, m := range ms {
		if !slices.Contains(l.keyed.sent[session][m.ItemKey], m.MessageId) {
			l.keyed.sent[session][m.ItemKey] = append(l.keyed.sent[session][m.ItemKey], m.MessageId)
		}
	}
}

// KeyedAcked records a keyed batch's acknowledgement as answered.
func (l *Ledger) KeyedAcked(session string, ms []*sessionv1.NewMessage, resp *sessionv1.AppendResponse) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keyed.acks = append(l.keyed.acks, KeyedAck{Session: session, Sent: ms, Got: resp.GetMessages()})
}

// keyed appends one keyed batch (see above) until it is acknowledged.
func (c *client) keyed(ctx context.Context, n int) error {
	sid := c.ld.keyedIDs[c.rng.IntN(len(c.ld.keyedIDs))]
	keys := []string{fmt.Sprintf("c%d-op%d", c.id, n)}
	for range 1 + c.rng.IntN(2) {
		if k := fmt.Sprintf("shared-%d", c.rng.IntN(sharedKeys)); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	req := &sessionv1.AppendRequest{SessionId: sid}
	for _, k := range keys {
		req.Messages = append(req.Messages, &sessionv1.NewMessage{MessageId: ids.New(), Role: sessionv1.Role_ROLE_TOOL,
			Content: fmt.Sprintf("client %d op %d key %s", c.id, n, k), ItemKey: k, Kind: "write",
			OnKeyConflict: sessionv1.KeyConflict_KEY_CONFLICT_KEEP_STORED})
	}
	var resp *sessionv1.AppendResponse
	var failed []codes.Code
	err := c.ld.call(ctx, "keyed append to "+sid, &c.at, true, &failed, func(ctx context.Context, conn int, ready grpc.CallOption) error {
		c.ld.ledger.KeyedSent(sid, req.Messages)
		var err error
		resp, err = c.ld.targets[conn].sessions.Append(ctx, req, ready)
		return err
	})
	if err != nil {
		return err
	}
	c.ld.ledger.RetryAnswered("keyed append of "+req.Messages[0].MessageId+" to "+sid, failed, resp.GetDuplicate())
	c.ld.ledger.KeyedAcked(sid, req.Messages, resp)
	return nil
}

// checkKeyed judges the keyed sessions (see above); l.mu is held.
func checkKeyed(l *Ledger, o *Observed, r *Report) {
	stored := map[string]map[string]*sessionv1.Message{}
	for _, sid := range l.keyed.sessions {
		ms, ok := o.Keyed[sid]
		if !ok {
			r.problem(&r.Lost, "keyed session %s: not found", sid)
			continue
		}
		byKey := map[string]*sessionv1.Message{}
		for i, m := range ms {
			key := m.GetItemKey()
			switch {
			case m.GetSequence() != int64(i):
				r.problem(&r.Gaps, "keyed session %s: sequence %d at index %d", sid, m.GetSequence(), i)
			case byKey[key] != nil:
				r.problem(&r.DupAppends, "keyed session %s: item key %q stored twice (sequences %d and %d)", sid, key, byKey[key].GetSequence(), m.GetSequence())
			case !slices.Contains(l.keyed.sent[sid][key], m.GetMessageId()):
				r.problem(&r.Phantom, "keyed session %s: message %s under key %q was never sent for it", sid, m.GetMessageId(), key)
			}
			if byKey[key] == nil {
				byKey[key] = m
			}
		}
		stored[sid] = byKey
		r.KeyedStored += len(ms)
	}
	for _, a := range l.keyed.acks {
		r.KeyedAcked++
		if len(a.Got) != len(a.Sent) {
			r.problem(&r.BadAcks, "keyed append to %s: %d answers for %d messages", a.Session, len(a.Got), len(a.Sent))
			continue
		}
		for i, got := range a.Got {
			sent := a.Sent[i]
			if got.GetKept() == (got.GetMessageId() == sent.MessageId) {
				r.problem(&r.BadAcks, "keyed append to %s: key %q answered message %s (kept %v) for sent %s",
					a.Session, sent.ItemKey, got.GetMessageId(), got.GetKept(), sent.MessageId)
			}
			if got.GetKept() {
				r.KeyedKept++
			}
			m := stored[a.Session][sent.ItemKey]
			switch {
			case m == nil:
				r.problem(&r.Lost, "keyed session %s: acknowledged key %q not stored", a.Session, sent.ItemKey)
			case m.GetMessageId() != got.GetMessageId() || m.GetSequence() != got.GetSequence():
				r.problem(&r.Changed, "keyed session %s: key %q holds %s at %d, answered %s at %d",
					a.Session, sent.ItemKey, m.GetMessageId(), m.GetSequence(), got.GetMessageId(), got.GetSequence())
			}
		}
	}
}
