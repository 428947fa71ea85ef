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
	metadata_json, created_at, event_at, indexed, item_key, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// A stored message id is skipped, not an error: that is how duplicate
	// turns are found without a lookup per message. A taken sequence still
	// fails.
	appendMessageSQL = insertMessageSQL + ` ON CONFLICT (message_id, session_id) DO NOTHING`
)

func (a *applier) CreateSession(c *persistence.CreateSession) (persistence.Result, error) {
	// row.Args lives in a.args until the insert below: nothing between
	// them runs a statement through a.args (ComputeScopes only queries).
	row, err := sqlstore.NewSessionRow(c, a.args[:0])
	if err != nil {
		return persistence.Result{}, err
	}
	s := c.Session
	if err := a.checkSessionsQuota(s.GetNamespace()); err != nil {
		return persistence.Result{}, err
	}
	scopes, err := a.ComputeScopes(c.Scopes)
	if err != nil {
		return persistence.Result{}, err
	}
	if err := a.usage.Check(persistence.CreateCharges(c, scopes)...); err != nil {
		return persistence.Result{}, err
	}
	// Through a.insert: the row's 17 arguments are bound in one cgo
	// crossing, not one each through database/sql (issue 17: a create's
	// cost).
	err = a.insert(insertSessionSQL, row.Args)
	clear(row.Args)
	a.args = row.Args[:0]
	if err != nil {
		if constraint(err) == sqlite3.ErrConstraintPrimaryKey || constraint(err) == sqlite3.ErrConstraintUnique {
			if a.sessionExists(s.SessionId) {
				return persistence.Result{}, errs.AlreadyExists("session %s exists", s.SessionId)
			}
			return persistence.Result{}, persistence.ClientKeyTaken(s.GetNamespace(), s.GetClientKey())
		}
		return persistence.Result{}, err
	}
	a.usage.Learn(s.SessionId, s.GetNamespace())
	a.usage.AddSession(s.SessionId, persistence.StateBytes(c.State))
	if err := a.WriteScopes(scopes, row.UpdatedAt); err != nil {
		return persistence.Result{}, err
	}
	if c.Snapshot != nil {
		if _, err := a.PutSnapshot(&persistence.PutSnapshot{SessionID: s.SessionId, Snapshot: c.Snapshot}); err != nil {
			return persistence.Result{}, err
		}
	}
	for i, m := range c.Messages {
		created, _ := persistence.MessageNanos(m) // checked by NewSessionRow
		meta := sqlstore.OrEmptyObject(m.MetadataJson)
		_, err = a.exec(insertMessageSQL, s.SessionId, row.First+int64(i), m.MessageId, int64(m.Role), m.Content,
			meta, created, persistence.EventNanos(m), a.indexed(), m.ItemKey, m.Kind)
		a.inserted(1)
		a.usage.AddSession(s.SessionId, persistence.MessageBytes(m.Content, meta))
		if err != nil {
			if c := constraint(err); c == sqlite3.ErrConstraintUnique || c == sqlite3.ErrConstraintPrimaryKey {
				return persistence.Result{}, errs.InvalidArgument("create session %s: message id %s or item key %q appears twice", s.SessionId, m.MessageId, m.ItemKey)
			}
			return persistence.Result{}, err
		}
	}
	return sqlstore.Created(a, c)
}

// sessionExists tells a taken session id from a taken client key.
func (a *applier) sessionExists(id string) bool {
	var one int
	return a.queryRow(`SELECT 1 FROM sessions WHERE session_id = ?`, id).Scan(&one) == nil
}

// Link upserts a session's link to a plan.
func (a *applier) Link(sessionID string, l *sessionv1.LinkedPlan) error {
	args, err := sqlstore.LinkArgs(sessionID, l)
	if err == nil {
		_, err = a.exec(sqlstore.UpsertLinkSQL, args...)
	}
	return err
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
	if err := a.Audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.Result{}, nil
}

func (a *applier) DeleteSession(c *persistence.DeleteSession) (persistence.Result, error) {
	var ns string
	var state int64
	err := a.queryRow(`SELECT namespace, `+stateBytesSQL+` FROM sessions WHERE session_id = ?`, c.SessionID).Scan(&ns, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.Result{}, errs.NotFound("session %s not found", c.SessionID)
	}
	if err != nil {
		return persistence.Result{}, err
	}
	a.usage.Learn(c.SessionID, ns)
	a.names.forget(c.SessionID)
	var res persistence.DeleteResult
	if c.Limit > 0 {
		if err := a.bookDeleted(c.SessionID, `SELECT COALESCE(SUM(`+messageBytesSQL+`), 0) FROM message_rows
			WHERE id IN (`+lastMessagesSQL+`)`, c.SessionID, c.Limit); err != nil {
			return persistence.Result{}, err
		}
		del, err := a.exec(deleteLastMessagesSQL, c.SessionID, c.Limit)
		if err != nil {
			return persistence.Result{}, err
		}
		if res.MessagesRemoved, err = rowsAffected(del); err != nil {
			return persistence.Result{}, err
		}
		if res.MessagesRemoved == int64(c.Limit) {
			return res.Result(), nil
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
	removed, err := a.deleteMessages(c.SessionID, `session_id = ?`, c.SessionID)
	if err != nil {
		return persistence.Result{}, err
	}
	res.MessagesRemoved += removed
	if err := a.deleteSnapshot(c.SessionID, `session_id = ?`, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(`DELETE FROM removed_message_ids WHERE session_id = ?`, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(`DELETE FROM sessions WHERE session_id = ?`, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	a.usage.AddSession(c.SessionID, -state)
	if err := a.Audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return res.Result(), nil
}

// deleteLastMessagesSQL deletes a session's last ?2 messages. Its ORDER
// BY … LIMIT is on the union of the two index tables itself, which SQLite
// runs as a merge of their keys that stops after ?2 rows; through the view
// (an IN subquery with ORDER BY is not flattened) it would sort all the
// session's messages on every call. The delete trigger of message_rows
// removes the index entries.
const deleteLastMessagesSQL = `DELETE FROM message_rows WHERE id IN (` + lastMessagesSQL + `)`

// lastMessagesSQL selects the ids of a session's last ?2 messages.
const lastMessagesSQL = `SELECT id FROM (
	SELECT id, sequence FROM message_index WHERE session_id = ?1
	UNION ALL
	SELECT id, sequence FROM message_pending WHERE session_id = ?1
	ORDER BY sequence DESC LIMIT ?2)`

// deleteMessages deletes the messages that the view session_messages
// selects with where (no ORDER BY or LIMIT: see deleteLastMessagesSQL)
// and returns how
// many; where selects messages of session sessionID only, whose stored
// bytes it books. Through the view, because only it finds a session's rows by index
// whether they are pending or settled; a DELETE on message_rows with the
// same WHERE would scan the table. message_rows' delete trigger takes the
// rows' entries out of message_index and message_pending.
func (a *applier) deleteMessages(sessionID, where string, args ...any) (int64, error) {
	if err := a.bookDeleted(sessionID, `SELECT COALESCE(SUM(`+messageBytesSQL+`), 0) FROM session_messages WHERE `+where, args...); err != nil {
		return 0, err
	}
	del, err := a.exec(`DELETE FROM message_rows WHERE id IN (SELECT id FROM session_messages WHERE `+where+`)`, args...)
	if err != nil {
		return 0, err
	}
	return rowsAffected(del)
}

// deleteSnapshot deletes session sessionID's snapshot where where holds
// (a condition on its row), booking its bytes.
func (a *applier) deleteSnapshot(sessionID, where string, args ...any) error {
	if err := a.bookDeleted(sessionID, `SELECT COALESCE(SUM(length(data)), 0) FROM session_snapshots WHERE `+where, args...); err != nil {
		return err
	}
	_, err := a.exec(`DELETE FROM session_snapshots WHERE `+where, args...)
	return err
}
