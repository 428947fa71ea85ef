package sqlite

import (
	"database/sql"
	"errors"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// AppendMessages inserts turn by turn from NextSequence, then moves the
// session's next_sequence from NextSequence to the end in one UPDATE that
// also checks it: a stale or skipping NextSequence matches no row and fails
// the command (and its savepoint undoes the inserts). A stale one may fail
// earlier, on the (session_id, sequence) key of message_pending or
// message_index (schema migration 7; the insert's trigger writes the
// row's entry there); a missing session fails on
// the UPDATE (message rows have no foreign key since migration 5, so this
// check is what keeps a message from outliving or preceding its session).
//
// Without savepoints (a.buffered) the rows go in multi-row statements
// (appendBulk); with them, row by row (turn), which is what tells a
// retried turn (stored message ids) from a taken sequence.
func (a *applier) AppendMessages(c *persistence.AppendMessages) (persistence.Result, error) {
	if !a.buffered {
		return a.appendRows(c)
	}
	res := persistence.AppendResult{Turns: make([]persistence.TurnResult, len(c.Turns))}
	at, err := persistence.StoredTimeNanos("updated_at", c.UpdatedAt)
	if err != nil {
		return persistence.Result{}, persistence.Of("session", c.SessionID, err)
	}
	next, state, added, err := a.appendBulk(c, res.Turns, at)
	if err != nil {
		return persistence.Result{}, err
	}
	v, err := advanceOf(c, next, state)
	if err != nil {
		return persistence.Result{}, err
	}
	if v.ns, err = a.names.of(a, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	v.bytes, v.checkNS = added, true
	// The epoch check and the sequence compare-and-set are pooled too
	// (see advance); dispatch skipped checkEpoch for this command.
	a.advances = append(a.advances, v)
	res.NextSequence = next
	res.State = state
	return res.Result(), nil
}

// appendRows stores c turn by turn, row by row, and applies its advance at
// once: the replay's path, and a ReplaceSuffix's in any attempt.
func (a *applier) appendRows(c *persistence.AppendMessages) (persistence.Result, error) {
	// The replay may be for a stale cached namespace (sessionNames).
	a.names.forget(c.SessionID)
	res := persistence.AppendResult{Turns: make([]persistence.TurnResult, len(c.Turns))}
	next := c.NextSequence
	// state is the session's state after the stored turns; it stays ""
	// unless one of them changed it.
	state := ""
	at, err := persistence.StoredTimeNanos("updated_at", c.UpdatedAt)
	if err != nil {
		return persistence.Result{}, persistence.Of("session", c.SessionID, err)
	}
	cur := c.State
	gate, err := a.hasRemovedIDs(c.SessionID)
	if err != nil {
		return persistence.Result{}, err
	}
	for i := range c.Turns {
		if gate {
			bad, err := a.removedReuse(c.SessionID, &c.Turns[i])
			if err != nil {
				return persistence.Result{}, err
			}
			if bad != nil {
				res.Turns[i].Err = bad
				continue
			}
		}
		tr, n, after, err := a.turn(c.SessionID, &c.Turns[i], next, cur, at)
		if err != nil {
			return persistence.Result{}, err
		}
		res.Turns[i] = tr
		next += n
		if after != "" {
			cur, state = after, after
		}
	}
	v, err := advanceOf(c, next, state)
	if err != nil {
		return persistence.Result{}, err
	}
	if err := a.applyAdvance(v); err == errAdvanceMissed {
		// The epoch was checked: the session moved on or is gone.
		return persistence.Result{}, a.sequenceMismatch(c.SessionID, c.NextSequence)
	} else if err != nil {
		return persistence.Result{}, err
	}
	res.NextSequence = next
	res.State = state
	return res.Result(), nil
}

// sequenceMismatch explains why an append's check matched no session.
func (a *applier) sequenceMismatch(sessionID string, want int64) error {
	var next int64
	err := a.queryRow(`SELECT next_sequence FROM sessions WHERE session_id = ?`, sessionID).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return errs.NotFound("session %s not found", sessionID)
	}
	if err != nil {
		return err
	}
	return errs.FailedPrecondition("session %s: append at sequence %d, but the next sequence is %d", sessionID, want, next)
}

// turn stores one turn at sequences seq, seq+1, ... and returns how many
// messages it stored, and the session's state after it when it changed it
// (from state). Its error is a command-level or transaction-level failure;
// turn-level outcomes are in the TurnResult.
func (a *applier) turn(sessionID string, t *persistence.Turn, seq int64, state string, at int64) (persistence.TurnResult, int64, string, error) {
	if err := t.Check(sessionID); err != nil {
		return persistence.TurnResult{Err: err}, 0, "", nil
	}
	after, scopes := "", []persistence.ScopeWrite(nil)
	if t.HasDelta() {
		var err error
		if after, scopes, err = a.turnDeltas(sessionID, state, t); err != nil {
			if persistence.IsCommandError(err) {
				return persistence.TurnResult{Err: err}, 0, "", nil
			}
			return persistence.TurnResult{}, 0, "", err
		}
		if t.State == nil {
			after = ""
		}
	}
	k, bad, err := persistence.ResolveKeys(sessionID, t, a.storedKeys)
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
	if bad, err := a.usage.CheckNewTurn(sessionID, k.Insert, change, scopes, a.messageStored); err != nil || bad != nil {
		return persistence.TurnResult{Err: bad}, 0, "", err
	}
	tr, n, err := a.turnRows(sessionID, k.Insert, seq)
	if err != nil || tr.Err != nil || tr.Duplicate {
		// A duplicate's deltas were applied with the original.
		return k.Merge(tr), n, "", err
	}
	if err := a.WriteScopes(scopes, at); err != nil {
		return persistence.TurnResult{}, 0, "", err
	}
	a.usage.AddSession(sessionID, change)
	return k.Merge(tr), n, after, nil
}

// messageStored is CheckNewTurn's lookup.
func (a *applier) messageStored(sessionID, messageID string) (bool, error) {
	_, err := a.storedMessage(sessionID, messageID)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// turnRows stores the messages of turn t (checked by checkTurn).
func (a *applier) turnRows(sessionID string, t *persistence.Turn, seq int64) (persistence.TurnResult, int64, error) {
	out := make([]*sessionv1.Message, len(t.Messages))
	var inserted int64
	skipped, firstSkipped := 0, ""
	for i, m := range t.Messages {
		created, err := persistence.MessageNanos(m)
		if err != nil {
			return persistence.TurnResult{Err: err}, 0, nil
		}
		meta := sqlstore.OrEmptyObject(m.MetadataJson)
		res, err := a.exec(appendMessageSQL, sessionID, seq+inserted, m.MessageId, int64(m.Role), m.Content, meta, created,
			persistence.EventNanos(m), a.indexed(), m.ItemKey, m.Kind)
		if err != nil {
			switch constraint(err) {
			case sqlite3.ErrConstraintUnique, sqlite3.ErrConstraintPrimaryKey:
				return persistence.TurnResult{}, 0, errs.FailedPrecondition("session %s: sequence %d is taken", sessionID, seq+inserted)
			case sqlite3.ErrConstraintForeignKey:
				return persistence.TurnResult{}, 0, errs.NotFound("session %s not found", sessionID)
			}
			return persistence.TurnResult{}, 0, err
		}
		n, err := rowsAffected(res)
		if err != nil {
			return persistence.TurnResult{}, 0, err
		}
		if n == 0 {
			if skipped == 0 {
				firstSkipped = m.MessageId
			}
			skipped++
			continue
		}
		a.usage.AddSession(sessionID, persistence.MessageBytes(m.Content, meta))
		out[i] = &sessionv1.Message{SessionId: sessionID, MessageId: m.MessageId, Sequence: seq + inserted,
			Role: m.Role, Content: m.Content, MetadataJson: meta, CreatedAt: persistence.Stamp(created), EventTime: m.EventTime,
			ItemKey: m.ItemKey, Kind: m.Kind}
		inserted++
		a.inserted(1)
	}
	switch {
	case skipped == 0:
		if err := a.Audit(t.Audit); err != nil {
			return persistence.TurnResult{}, 0, err
		}
		return persistence.TurnResult{Messages: out}, inserted, nil
	case inserted > 0:
		// Some ids were stored before, some not: undo this turn's rows.
		if _, err := a.deleteMessages(sessionID, `session_id = ? AND sequence >= ? AND sequence < ?`,
			sessionID, seq, seq+inserted); err != nil {
			return persistence.TurnResult{}, 0, err
		}
		return persistence.TurnResult{Err: persistence.MessageIDTaken(sessionID, firstSkipped)}, 0, nil
	}
	for i, m := range t.Messages {
		stored, err := a.storedMessage(sessionID, m.MessageId)
		if err != nil {
			return persistence.TurnResult{}, 0, err
		}
		out[i] = stored
	}
	if err := persistence.CheckRetry(sessionID, t.Messages, out); err != nil {
		return persistence.TurnResult{Err: err}, 0, nil
	}
	return persistence.TurnResult{Duplicate: true, Messages: out}, 0, nil
}

func (a *applier) storedMessage(sessionID, messageID string) (*sessionv1.Message, error) {
	return a.scanStored(a.queryRow(`SELECT `+storedColumns+` FROM message_rows
		WHERE message_id = ? AND session_id = ?`, messageID, sessionID), sessionID)
}

// storedColumns are what scanStored reads of a message_rows row.
const storedColumns = `message_id, sequence, role, content, metadata_json, created_at, event_at, item_key, kind`

func (a *applier) scanStored(row *sql.Row, sessionID string) (*sessionv1.Message, error) {
	m := &sessionv1.Message{SessionId: sessionID}
	var role, created, event int64
	err := row.Scan(&m.MessageId, &m.Sequence, &role, &m.Content, &m.MetadataJson, &created, &event, &m.ItemKey, &m.Kind)
	if err != nil {
		return nil, err
	}
	m.Role = sessionv1.Role(role)
	m.CreatedAt = persistence.Stamp(created)
	m.EventTime = persistence.Stamp(event)
	return m, nil
}

// storedKeys is ResolveKeys' lookup: one probe of message_rows_by_key per
// key (a turn has few), inside the append's transaction.
func (a *applier) storedKeys(sessionID string, keys []string) (map[string]*sessionv1.Message, error) {
	out := make(map[string]*sessionv1.Message, len(keys))
	for _, k := range keys {
		m, err := a.scanStored(a.queryRow(`SELECT `+storedColumns+` FROM message_rows
			WHERE session_id = ? AND item_key = ? AND item_key != ''`, sessionID, k), sessionID)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[k] = m
	}
	return out, nil
}
