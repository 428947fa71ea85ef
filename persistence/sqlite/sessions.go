package sqlite

import (
	"database/sql"
	"errors"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
	sqlite3 "github.com/mattn/go-sqlite3"
)

const (
	insertSessionSQL = `INSERT INTO sessions (` + sqlstore.SessionColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// Messages are written to message_rows, pending (indexed = 0) or
	// settled (1) as the transaction's shape says (pendingLayout): the
	// table's triggers put the row's (session_id, sequence) entry into
	// message_pending or message_index, whose keys refuse a taken sequence
	// (a PRIMARY KEY constraint error). Read through the view
	// session_messages (schema migrations 5 and 7; settle in writer.go).
	insertMessageSQL = `INSERT INTO message_rows (session_id, sequence, message_id, role, content,
	metadata_json, created_at, event_at, indexed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// A stored message id is skipped, not an error: that is how duplicate
	// turns are found without a lookup per message. A taken sequence still
	// fails.
	appendMessageSQL = insertMessageSQL + ` ON CONFLICT (message_id, session_id) DO NOTHING`
)

func (a *applier) CreateSession(c *persistence.CreateSession) (persistence.Result, error) {
	row, err := sqlstore.NewSessionRow(c)
	if err != nil {
		return persistence.Result{}, err
	}
	s := c.Session
	scopes, err := a.scopeStates(c.Scopes)
	if err != nil {
		return persistence.Result{}, err
	}
	// Through a.insert: the row's 17 arguments are bound in one cgo
	// crossing, not one each through database/sql (issue 17: a create's
	// cost).
	if err := a.insert(insertSessionSQL, row.Args); err != nil {
		if constraint(err) == sqlite3.ErrConstraintPrimaryKey || constraint(err) == sqlite3.ErrConstraintUnique {
			if a.sessionExists(s.SessionId) {
				return persistence.Result{}, errs.AlreadyExists("session %s exists", s.SessionId)
			}
			return persistence.Result{}, persistence.ClientKeyTaken(s.GetNamespace(), s.GetClientKey())
		}
		return persistence.Result{}, err
	}
	if err := a.writeScopes(scopes, row.UpdatedAt); err != nil {
		return persistence.Result{}, err
	}
	if c.Snapshot != nil {
		if _, err := a.PutSnapshot(&persistence.PutSnapshot{SessionID: s.SessionId, Snapshot: c.Snapshot}); err != nil {
			return persistence.Result{}, err
		}
	}
	for i, m := range c.Messages {
		created, _ := persistence.MessageNanos(m) // checked by NewSessionRow
		_, err = a.exec(insertMessageSQL, s.SessionId, row.First+int64(i), m.MessageId, int64(m.Role), m.Content,
			sqlstore.OrEmptyObject(m.MetadataJson), created, persistence.EventNanos(m), a.indexed())
		a.inserted(1)
		if err != nil {
			if c := constraint(err); c == sqlite3.ErrConstraintUnique || c == sqlite3.ErrConstraintPrimaryKey {
				return persistence.Result{}, errs.InvalidArgument("create session %s: message id %s appears twice", s.SessionId, m.MessageId)
			}
			return persistence.Result{}, err
		}
	}
	return sqlstore.Created(a, c, row)
}

// sessionExists tells a taken session id from a taken client key.
func (a *applier) sessionExists(id string) bool {
	var one int
	return a.queryRow(`SELECT 1 FROM sessions WHERE session_id = ?`, id).Scan(&one) == nil
}

// Audit is audit, for sqlstore.Tx.
func (a *applier) Audit(entries []*auditv1.AuditEntry) error { return a.audit(entries) }

// Link upserts a session's link to a plan.
func (a *applier) Link(sessionID string, l *sessionv1.LinkedPlan) error {
	args, err := sqlstore.LinkArgs(sessionID, l)
	if err == nil {
		_, err = a.exec(sqlstore.UpsertLinkSQL, args...)
	}
	return err
}

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
	res := persistence.Result{Turns: make([]persistence.TurnResult, len(c.Turns))}
	next := c.NextSequence
	// state is the session's state after the stored turns; it stays ""
	// unless one of them changed it.
	state := ""
	at, err := persistence.StoredTimeNanos("updated_at", c.UpdatedAt)
	if err != nil {
		return persistence.Result{}, persistence.Of("session", c.SessionID, err)
	}
	if a.buffered {
		if next, state, err = a.appendBulk(c, res.Turns, at); err != nil {
			return persistence.Result{}, err
		}
	} else {
		cur := c.State
		for i := range c.Turns {
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
	}
	v, err := advanceOf(c, next, state)
	if err != nil {
		return persistence.Result{}, err
	}
	if a.buffered {
		// The epoch check and the sequence compare-and-set are pooled too
		// (see advance); dispatch skipped checkEpoch for this command.
		a.advances = append(a.advances, v)
	} else if err := a.applyAdvance(v); err == errAdvanceMissed {
		// dispatch checked the epoch: the session moved on or is gone.
		return persistence.Result{}, a.sequenceMismatch(c.SessionID, c.NextSequence)
	} else if err != nil {
		return persistence.Result{}, err
	}
	res.NextSequence = next
	res.State = state
	return res, nil
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
	after, scopes := "", []scopeWrite(nil)
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
	tr, n, err := a.turnRows(sessionID, t, seq)
	if err != nil || tr.Err != nil || tr.Duplicate {
		// A duplicate's deltas were applied with the original.
		return tr, n, "", err
	}
	if err := a.writeScopes(scopes, at); err != nil {
		return persistence.TurnResult{}, 0, "", err
	}
	return tr, n, after, nil
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
			persistence.EventNanos(m), a.indexed())
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
		out[i] = &sessionv1.Message{SessionId: sessionID, MessageId: m.MessageId, Sequence: seq + inserted,
			Role: m.Role, Content: m.Content, MetadataJson: meta, CreatedAt: persistence.Stamp(created), EventTime: m.EventTime}
		inserted++
		a.inserted(1)
	}
	switch {
	case skipped == 0:
		if err := a.audit(t.Audit); err != nil {
			return persistence.TurnResult{}, 0, err
		}
		return persistence.TurnResult{Messages: out}, inserted, nil
	case inserted > 0:
		// Some ids were stored before, some not: undo this turn's rows.
		if _, err := a.deleteMessages(`session_id = ? AND sequence >= ? AND sequence < ?`,
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
	m := &sessionv1.Message{SessionId: sessionID, MessageId: messageID}
	var role, created, event int64
	err := a.queryRow(`SELECT sequence, role, content, metadata_json, created_at, event_at FROM message_rows
		WHERE message_id = ? AND session_id = ?`, messageID, sessionID).Scan(&m.Sequence, &role, &m.Content, &m.MetadataJson, &created, &event)
	if err != nil {
		return nil, err
	}
	m.Role = sessionv1.Role(role)
	m.CreatedAt = persistence.Stamp(created)
	m.EventTime = persistence.Stamp(event)
	return m, nil
}

func (a *applier) UpdateSession(c *persistence.UpdateSession) (persistence.Result, error) {
	args, setExpiry, expiresAt, err := sqlstore.UpdateArgs(c)
	if err != nil {
		return persistence.Result{}, err
	}
	// The sums are checked before they are made: SQLite would turn an
	// overflowing integer sum into a REAL, and a cost into Infinity. The
	// cost check is persistence.AddTokens's, as in PostgreSQL.
	res, err := a.exec(`UPDATE sessions SET
		state = CASE WHEN ?1 != 0 THEN ?1 ELSE state END,
		closed_at = CASE WHEN ?2 != 0 THEN ?2 ELSE closed_at END,
		input_tokens = input_tokens + ?3,
		output_tokens = output_tokens + ?4,
		cost = cost + ?5,
		updated_at = CASE WHEN ?6 != 0 THEN ?6 ELSE updated_at END
		WHERE session_id = ?7
		AND (?3 = 0 OR input_tokens <= ?8 - ?3)
		AND (?4 = 0 OR output_tokens <= ?8 - ?4)
		AND (?5 = 0 OR cost / 2 + ?5 / 2 <= ?9 / 2)`, args...)
	if err != nil {
		return persistence.Result{}, err
	}
	if n, err := rowsAffected(res); err != nil {
		return persistence.Result{}, err
	} else if n == 0 {
		return persistence.Result{}, sqlstore.UpdateMissed(txDB{a: a}, c.SessionID)
	}
	if c.LinkPlan != nil {
		if err := a.Link(c.SessionID, c.LinkPlan); err != nil {
			return persistence.Result{}, err
		}
	}
	if setExpiry {
		if _, err := a.exec(`UPDATE sessions SET expires_at = ? WHERE session_id = ?`, expiresAt, c.SessionID); err != nil {
			return persistence.Result{}, err
		}
	}
	if err := a.audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.Result{}, nil
}

func (a *applier) DeleteSession(c *persistence.DeleteSession) (persistence.Result, error) {
	var one int
	err := a.queryRow(`SELECT 1 FROM sessions WHERE session_id = ?`, c.SessionID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.Result{}, errs.NotFound("session %s not found", c.SessionID)
	}
	if err != nil {
		return persistence.Result{}, err
	}
	var res persistence.Result
	if c.Limit > 0 {
		del, err := a.exec(deleteLastMessagesSQL, c.SessionID, c.Limit)
		if err != nil {
			return persistence.Result{}, err
		}
		if res.MessagesRemoved, err = rowsAffected(del); err != nil {
			return persistence.Result{}, err
		}
		if res.MessagesRemoved == int64(c.Limit) {
			return res, nil
		}
	}
	rows, err := a.tx.QueryContext(a.ctx, `SELECT plan_id FROM session_links WHERE session_id = ? ORDER BY id`, c.SessionID)
	if err != nil {
		return persistence.Result{}, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return persistence.Result{}, err
		}
		res.PlansOrphaned = append(res.PlansOrphaned, id)
	}
	if err := rows.Close(); err != nil {
		return persistence.Result{}, err
	}
	if err := rows.Err(); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(`DELETE FROM session_links WHERE session_id = ?`, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	removed, err := a.deleteMessages(`session_id = ?`, c.SessionID)
	if err != nil {
		return persistence.Result{}, err
	}
	res.MessagesRemoved += removed
	if _, err := a.exec(`DELETE FROM session_snapshots WHERE session_id = ?`, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(`DELETE FROM sessions WHERE session_id = ?`, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if err := a.audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return res, nil
}

// deleteLastMessagesSQL deletes a session's last ?2 messages. Its ORDER
// BY … LIMIT is on the union of the two index tables itself, which SQLite
// runs as a merge of their keys that stops after ?2 rows; through the view
// (an IN subquery with ORDER BY is not flattened) it would sort all the
// session's messages on every call. The delete trigger of message_rows
// removes the index entries.
const deleteLastMessagesSQL = `DELETE FROM message_rows WHERE id IN (SELECT id FROM (
	SELECT id, sequence FROM message_index WHERE session_id = ?1
	UNION ALL
	SELECT id, sequence FROM message_pending WHERE session_id = ?1
	ORDER BY sequence DESC LIMIT ?2))`

// deleteMessages deletes the messages that the view session_messages
// selects with where (no ORDER BY or LIMIT: see deleteLastMessagesSQL)
// and returns how
// many. Through the view, because only it finds a session's rows by index
// whether they are pending or settled; a DELETE on message_rows with the
// same WHERE would scan the table. message_rows' delete trigger takes the
// rows' entries out of message_index and message_pending.
func (a *applier) deleteMessages(where string, args ...any) (int64, error) {
	del, err := a.exec(`DELETE FROM message_rows WHERE id IN (SELECT id FROM session_messages WHERE `+where+`)`, args...)
	if err != nil {
		return 0, err
	}
	return rowsAffected(del)
}
