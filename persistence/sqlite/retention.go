package sqlite

import (
	"context"
	"database/sql"
	"errors"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

func (a *applier) requireSession(id string) error {
	if !a.sessionExists(id) {
		return errs.NotFound("session %s not found", id)
	}
	return nil
}

// TruncateSession removes the lowest messages through c.Through, at most
// c.Limit of them; the cut is the highest sequence removed, so the
// messages left are always a suffix of the session and a reader between
// two commands sees a consistent, shorter history.
func (a *applier) TruncateSession(c *persistence.TruncateSession) (persistence.Result, error) {
	if err := a.requireSession(c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	at, err := persistence.StoredTimeNanos("updated_at", c.UpdatedAt)
	if err != nil {
		return persistence.Result{}, persistence.Of("session", c.SessionID, err)
	}
	cut := c.Through
	if c.Limit > 0 {
		var s int64
		err := a.queryRow(`SELECT sequence FROM session_messages WHERE session_id = ? AND sequence <= ?
			ORDER BY sequence LIMIT 1 OFFSET ?`, c.SessionID, c.Through, c.Limit-1).Scan(&s)
		switch {
		case err == nil:
			cut = s
		case !errors.Is(err, sql.ErrNoRows):
			return persistence.Result{}, err
		}
	}
	removed, err := a.deleteMessages(`session_id = ? AND sequence <= ?`, c.SessionID, cut)
	if err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(`UPDATE sessions SET first_sequence = max(first_sequence, min(? + 1, next_sequence)),
		updated_at = CASE WHEN ? != 0 THEN ? ELSE updated_at END WHERE session_id = ?`,
		cut, at, at, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if err := a.audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.Result{Removed: removed}, nil
}

func (a *applier) PutSnapshot(c *persistence.PutSnapshot) (persistence.Result, error) {
	if err := a.requireSession(c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if c.Snapshot == nil {
		del, err := a.exec(`DELETE FROM session_snapshots WHERE session_id = ? AND sequence <= ?`, c.SessionID, c.DeleteThrough)
		if err != nil {
			return persistence.Result{}, err
		}
		n, err := rowsAffected(del)
		return persistence.Result{Removed: n}, err
	}
	created, err := persistence.StoredNanos("created_at", c.Snapshot.GetCreatedAt())
	if err != nil {
		return persistence.Result{}, persistence.Of("snapshot of session", c.SessionID, err)
	}
	data := c.Snapshot.GetData()
	if data == nil {
		data = []byte{}
	}
	_, err = a.exec(`INSERT INTO session_snapshots (session_id, sequence, data, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (session_id) DO UPDATE SET sequence = excluded.sequence, data = excluded.data, created_at = excluded.created_at`,
		c.SessionID, c.Snapshot.GetSequence(), data, created)
	return persistence.Result{}, err
}

// setExpiry is UpdateSession's expiry change.
func (a *applier) setExpiry(c *persistence.UpdateSession) error {
	if !c.SetExpiry {
		return nil
	}
	var n int64
	if !c.ExpiresAt.IsZero() {
		var err error
		if n, err = persistence.StoredTimeNanos("expires_at", c.ExpiresAt); err != nil {
			return persistence.Of("session", c.SessionID, err)
		}
	}
	_, err := a.exec(`UPDATE sessions SET expires_at = ? WHERE session_id = ?`, n, c.SessionID)
	return err
}

// ListMessagesWhere filters on the event time (the client's, else
// created_at); with Last it reads the session's tail backwards and
// returns it in sequence order.
func (r *reader) ListMessagesWhere(ctx context.Context, f persistence.MessageFilter) ([]*sessionv1.Message, error) {
	if f.Last <= 0 && f.After == 0 && f.Before == 0 {
		return r.ListMessages(ctx, f.SessionID, f.From, f.Limit)
	}
	order, limit, _, after, before := sqlstore.Window(f)
	rows, err := r.db.QueryContext(ctx, `SELECT length(CAST(content AS BLOB)) + length(CAST(metadata_json AS BLOB)) + ?1,
		sequence, message_id, role, content, metadata_json, created_at, event_at
		FROM session_messages WHERE session_id = ?2 AND sequence >= ?3
		AND (CASE WHEN event_at != 0 THEN event_at ELSE created_at END) > ?4
		AND (CASE WHEN event_at != 0 THEN event_at ELSE created_at END) < ?5
		AND NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = ?2 AND state = ?7)
		ORDER BY sequence `+order+` LIMIT ?6`,
		persistence.MessageOverhead, f.SessionID, f.From, after, before, limit, int64(persistence.SessionStateStaged))
	if err != nil {
		return nil, storeErr("list messages", err)
	}
	defer rows.Close()
	var out []*sessionv1.Message
	bytes := 0
	for rows.Next() {
		m := &sessionv1.Message{SessionId: f.SessionID}
		var role, created, event, size int64
		if err := rows.Scan(&size, &m.Sequence, &m.MessageId, &role, &m.Content, &m.MetadataJson, &created, &event); err != nil {
			return nil, storeErr("list messages", err)
		}
		if bytes += int(size); f.Last <= 0 && len(out) > 0 && bytes > persistence.MaxPageBytes {
			break
		}
		m.Role, m.CreatedAt, m.EventTime = sessionv1.Role(role), persistence.Stamp(created), persistence.Stamp(event)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr("list messages", err)
	}
	if f.Last > 0 {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out, nil
}
