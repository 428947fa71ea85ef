package sqlite

import (
	"context"

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
	cut, at, err := sqlstore.TruncateCut(txDB{a: a}, c)
	if err != nil {
		return persistence.Result{}, err
	}
	removed, err := a.deleteMessages(c.SessionID, `session_id = ? AND sequence <= ?`, c.SessionID, cut)
	if err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(`UPDATE sessions SET first_sequence = max(first_sequence, min(? + 1, next_sequence)),
		updated_at = CASE WHEN ? != 0 THEN ? ELSE updated_at END WHERE session_id = ?`,
		cut, at, at, c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if err := a.Audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.RemovedResult{Removed: removed}.Result(), nil
}

func (a *applier) PutSnapshot(c *persistence.PutSnapshot) (persistence.Result, error) {
	if err := a.requireSession(c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	var old int64
	if err := a.queryRow(`SELECT COALESCE((SELECT length(data) FROM session_snapshots WHERE session_id = ?), 0)`,
		c.SessionID).Scan(&old); err != nil {
		return persistence.Result{}, err
	}
	if c.Snapshot == nil {
		del, err := a.exec(`DELETE FROM session_snapshots WHERE session_id = ? AND sequence <= ?`, c.SessionID, c.DeleteThrough)
		if err != nil {
			return persistence.Result{}, err
		}
		n, err := rowsAffected(del)
		if n > 0 {
			a.usage.AddSession(c.SessionID, -old)
		}
		return persistence.RemovedResult{Removed: n}.Result(), err
	}
	args, err := sqlstore.SnapshotArgs(c.SessionID, c.Snapshot)
	if err != nil {
		return persistence.Result{}, err
	}
	add := int64(len(c.Snapshot.GetData())) - old
	if err := a.usage.Check(persistence.Charge{Session: c.SessionID, Bytes: add}); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(sqlstore.PutSnapshotSQL, args...); err != nil {
		return persistence.Result{}, err
	}
	a.usage.AddSession(c.SessionID, add)
	return persistence.Result{}, nil
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
		`+pageColumns+`
		FROM session_messages WHERE session_id = ?2 AND sequence >= ?3
		AND (CASE WHEN event_at != 0 THEN event_at ELSE created_at END) > ?4
		AND (CASE WHEN event_at != 0 THEN event_at ELSE created_at END) < ?5
		AND NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = ?2 AND state = ?7)
		ORDER BY sequence `+order+` LIMIT ?6`,
		persistence.MessageOverhead, f.SessionID, f.From, after, before, limit, int64(persistence.SessionStateStaged))
	out, err := page(rows, err, f.SessionID, f.Last <= 0)
	if err != nil {
		return nil, err
	}
	if f.Last > 0 {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out, nil
}
