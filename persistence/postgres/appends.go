package postgres

import (
	"slices"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// appendMessages checks NextSequence against the locked session row, then
// inserts turn by turn from it, each turn moving next_sequence in the same
// statement. The UNIQUE(session_id, sequence) key is the backstop should
// the row ever disagree with the messages.
func (a *applier) appendMessages(c *persistence.AppendMessages) (persistence.Result, error) {
	if err := a.fence(persistence.OwnerSession, c.SessionID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	next, gate, err := a.lockAppend(c.SessionID)
	if err != nil {
		return persistence.Result{}, err
	}
	if next != c.NextSequence {
		return persistence.Result{}, errs.FailedPrecondition("session %s: append at sequence %d, but the next sequence is %d",
			c.SessionID, c.NextSequence, next)
	}
	res := persistence.AppendResult{Turns: make([]persistence.TurnResult, len(c.Turns))}
	cur := c.State
	for i := range c.Turns {
		if gate {
			digests, err := a.RemovedDigests(c.SessionID, persistence.MessageIDs(c.Turns[i].Messages))
			if err != nil {
				return persistence.Result{}, err
			}
			if bad := persistence.ReusedRemovedID(c.SessionID, c.Turns[i].Messages, digests); bad != nil {
				res.Turns[i].Err = bad
				continue
			}
		}
		tr, n, after, err := a.turn(c, &c.Turns[i], next, cur)
		if err != nil {
			return persistence.Result{}, err
		}
		res.Turns[i] = tr
		next += n
		if after != "" {
			cur, res.State = after, after
		}
	}
	if res.State != "" {
		if _, err := a.exec(setStateSQL, c.SessionID, res.State); err != nil {
			return persistence.Result{}, err
		}
	}
	res.NextSequence = next
	return res.Result(), nil
}

const setStateSQL = `UPDATE sessions SET state_json = $2 WHERE session_id = $1`

// turn stores one turn (turnRows) with its deltas, and returns the
// session's state after it when it changed it (from state).
func (a *applier) turn(c *persistence.AppendMessages, t *persistence.Turn, seq int64, state string) (persistence.TurnResult, int64, string, error) {
	if err := t.Check(c.SessionID); err != nil {
		return persistence.TurnResult{Err: err}, 0, "", nil
	}
	after, scopes := "", []persistence.ScopeWrite(nil)
	if t.HasDelta() {
		var bad, err error
		if after, scopes, bad, err = a.turnDeltas(c.SessionID, state, t); err != nil {
			return persistence.TurnResult{}, 0, "", err
		}
		if bad != nil {
			return persistence.TurnResult{Err: bad}, 0, "", nil
		}
	}
	k, bad, err := persistence.ResolveKeys(c.SessionID, t, a.storedKeys)
	if err != nil || bad != nil {
		return persistence.TurnResult{Err: bad}, 0, "", err
	}
	if k.AllKept() {
		return k.Merge(persistence.TurnResult{}), 0, "", nil
	}
	var change int64
	if t.State != nil {
		change = persistence.StateChange(state, after)
	}
	if bad, err := a.usage.CheckNewTurn(c.SessionID, k.Insert, change, scopes, a.messageStored); err != nil || bad != nil {
		return persistence.TurnResult{Err: bad}, 0, "", err
	}
	tr, n, err := a.turnRows(c, k.Insert, seq)
	if err != nil || tr.Err != nil || tr.Duplicate {
		// A duplicate's deltas were applied with the original.
		return k.Merge(tr), n, "", err
	}
	at, err := persistence.StoredTimeNanos("updated_at", c.UpdatedAt)
	if err != nil {
		return persistence.TurnResult{}, 0, "", persistence.Of("session", c.SessionID, err)
	}
	if err := a.WriteScopes(scopes, at); err != nil {
		return persistence.TurnResult{}, 0, "", err
	}
	a.usage.AddSession(c.SessionID, change)
	return k.Merge(tr), n, after, nil
}

// messageStored is CheckNewTurn's lookup.
func (a *applier) messageStored(sessionID, messageID string) (bool, error) {
	var stored bool
	err := a.queryRow(`SELECT EXISTS (SELECT 1 FROM session_messages WHERE session_id = $1 AND message_id = $2)`,
		[]any{sessionID, messageID}, &stored)
	return stored, err
}

// appendTurnSQL inserts a turn's messages, skipping stored ids, and in the
// same statement moves the session's next_sequence by the rows inserted,
// and its updated_at when $9 and the whole turn went in ($10 rows).
var appendTurnSQL = `WITH ins AS (` + insertMessages(11) + `
	ON CONFLICT (session_id, message_id) DO NOTHING RETURNING message_id),
n AS (SELECT count(*) AS n FROM ins),
upd AS (UPDATE sessions SET next_sequence = next_sequence + (SELECT n FROM n),
	updated_at = CASE WHEN $8::boolean AND (SELECT n FROM n) = $9::bigint THEN $10::bigint ELSE updated_at END
	WHERE session_id = $1)
SELECT message_id FROM ins`

// turn stores one turn of c at sequences seq, seq+1, ... and returns how
// many messages it stored. Its error is a command-level or
// transaction-level failure; turn-level outcomes are in the TurnResult.
func (a *applier) turnRows(c *persistence.AppendMessages, t *persistence.Turn, seq int64) (persistence.TurnResult, int64, error) {
	sessionID := c.SessionID
	rows, err := newMessageRows(t.Messages, seq)
	if err != nil {
		return persistence.TurnResult{Err: err}, 0, nil
	}
	updatedAt, err := persistence.StoredTimeNanos("updated_at", c.UpdatedAt)
	if err != nil {
		return persistence.TurnResult{}, 0, persistence.Of("session", sessionID, err)
	}
	args := append(append(rows.args(sessionID), !c.UpdatedAt.IsZero(), int64(len(t.Messages)), updatedAt), rows.tail()...)
	inserted, err := a.insertReturningIDs(appendTurnSQL, args)
	if err != nil {
		if uniqueViolation(err) == "session_messages_sequence_key" {
			return persistence.TurnResult{}, 0, errs.FailedPrecondition("session %s: a sequence from %d is taken", sessionID, seq)
		}
		return persistence.TurnResult{}, 0, err
	}
	switch len(inserted) {
	case len(t.Messages):
		a.usage.AddSession(sessionID, persistence.MessagesBytes(t.Messages))
		if err := a.Audit(t.Audit); err != nil {
			return persistence.TurnResult{}, 0, err
		}
		out := make([]*sessionv1.Message, len(t.Messages))
		for i, m := range t.Messages {
			out[i] = &sessionv1.Message{SessionId: sessionID, MessageId: m.MessageId, Sequence: seq + int64(i),
				Role: m.Role, Content: m.Content, MetadataJson: rows.metas[i], CreatedAt: persistence.Stamp(rows.created[i]),
				ItemKey: m.ItemKey, Kind: m.Kind}
		}
		return persistence.TurnResult{Messages: out}, int64(len(out)), nil
	case 0:
		out, err := a.storedMessages(sessionID, rows.ids)
		if err != nil {
			return persistence.TurnResult{}, 0, err
		}
		if err := persistence.CheckRetry(sessionID, t.Messages, out); err != nil {
			return persistence.TurnResult{Err: err}, 0, nil
		}
		return persistence.TurnResult{Duplicate: true, Messages: out}, 0, nil
	}
	// Some ids were stored before, some not: undo this turn's rows and its
	// move of next_sequence (updated_at was left alone).
	if _, err := a.exec(`WITH d AS (DELETE FROM session_messages WHERE session_id = $1 AND message_id = ANY($2::text[]) RETURNING 1)
		UPDATE sessions SET next_sequence = next_sequence - (SELECT count(*) FROM d) WHERE session_id = $1`,
		sessionID, inserted); err != nil {
		return persistence.TurnResult{}, 0, err
	}
	return persistence.TurnResult{Err: persistence.MessageIDTaken(sessionID, firstStored(rows.ids, inserted))}, 0, nil
}

// firstStored is the first of ids that is not among inserted: one stored
// before.
func firstStored(ids, inserted []string) string {
	for _, id := range ids {
		if !slices.Contains(inserted, id) {
			return id
		}
	}
	return ""
}

// insertReturningIDs runs an INSERT ... RETURNING of one text column.
func (a *applier) insertReturningIDs(query string, args []any) ([]string, error) {
	var ids []string
	var id string
	err := a.forEachRow(query, args, []any{&id}, func() error {
		ids = append(ids, id)
		return nil
	})
	return ids, err
}

// storedMessages returns the stored messages with these ids, in the ids'
// order; all of them exist.
func (a *applier) storedMessages(sessionID string, ids []string) ([]*sessionv1.Message, error) {
	byID, err := a.storedWhere(sessionID, "message_id", ids)
	if err != nil {
		return nil, err
	}
	out := make([]*sessionv1.Message, len(ids))
	for i, id := range ids {
		if out[i] = byID[id]; out[i] == nil {
			return nil, errs.Internal("session %s: stored message %s vanished", sessionID, id)
		}
	}
	return out, nil
}

// storedKeys is ResolveKeys' lookup, in the append's transaction.
func (a *applier) storedKeys(sessionID string, keys []string) (map[string]*sessionv1.Message, error) {
	byID, err := a.storedWhere(sessionID, "item_key", keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*sessionv1.Message, len(byID))
	for _, m := range byID {
		out[m.ItemKey] = m
	}
	return out, nil
}

// storedWhere reads the session's messages whose column (message_id or
// item_key, both indexed with the session) is one of values, by id.
func (a *applier) storedWhere(sessionID, column string, values []string) (map[string]*sessionv1.Message, error) {
	byID := make(map[string]*sessionv1.Message, len(values))
	var role, created, event int64
	m := &sessionv1.Message{}
	cond := column + ` = ANY($2::text[])`
	if column == "item_key" {
		cond += ` AND item_key <> ''`
	}
	err := a.forEachRow(`SELECT message_id, sequence, role, content, metadata_json, created_at, event_at, item_key, kind
		FROM session_messages WHERE session_id = $1 AND `+cond, []any{sessionID, values},
		[]any{&m.MessageId, &m.Sequence, &role, &m.Content, &m.MetadataJson, &created, &event, &m.ItemKey, &m.Kind}, func() error {
			byID[m.MessageId] = &sessionv1.Message{SessionId: sessionID, MessageId: m.MessageId, Sequence: m.Sequence,
				Role: sessionv1.Role(role), Content: m.Content, MetadataJson: m.MetadataJson, CreatedAt: persistence.Stamp(created),
				EventTime: persistence.Stamp(event), ItemKey: m.ItemKey, Kind: m.Kind}
			return nil
		})
	return byID, err
}
