package postgres

import (
	"context"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// TruncateSession removes the lowest messages through c.Through, at most
// c.Limit of them (as the SQLite store does: what is left is always a
// suffix of the session).
func (a *applier) TruncateSession(c *persistence.TruncateSession) (persistence.Result, error) {
	if err := a.fence(persistence.OwnerSession, c.SessionID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.lockSession(c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	cut, at, err := sqlstore.TruncateCut(txDB{a: a}, c)
	if err != nil {
		return persistence.Result{}, err
	}
	removed, err := a.deleteCounted(c.SessionID, `DELETE FROM session_messages WHERE session_id = $1 AND sequence <= $2
		RETURNING `+messageBytesSQL+` AS n`, c.SessionID, cut)
	if err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(`UPDATE sessions SET first_sequence = GREATEST(first_sequence, LEAST($2::bigint + 1, next_sequence)),
		updated_at = CASE WHEN $3::bigint <> 0 THEN $3::bigint ELSE updated_at END WHERE session_id = $1`,
		c.SessionID, cut, at); err != nil {
		return persistence.Result{}, err
	}
	if err := a.Audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.RemovedResult{Removed: removed}.Result(), nil
}

func (a *applier) PutSnapshot(c *persistence.PutSnapshot) (persistence.Result, error) {
	if err := a.fence(persistence.OwnerSession, c.SessionID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.lockSession(c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if c.Snapshot == nil {
		n, err := a.deleteCounted(c.SessionID, `DELETE FROM session_snapshots WHERE session_id = $1 AND sequence <= $2
			RETURNING octet_length(data) AS n`, c.SessionID, c.DeleteThrough)
		if err != nil {
			return persistence.Result{}, err
		}
		return persistence.RemovedResult{Removed: n}.Result(), nil
	}
	return a.putSnapshot(c.SessionID, c.Snapshot)
}

// putSnapshot fills the slot, within the namespace's quota of stored
// bytes (what it adds is the new snapshot less the one it replaces).
func (a *applier) putSnapshot(sessionID string, snap *sessionv1.Snapshot) (persistence.Result, error) {
	args, err := sqlstore.SnapshotArgs(sessionID, snap)
	if err != nil {
		return persistence.Result{}, err
	}
	var old int64
	if err := a.queryRow(`SELECT COALESCE((SELECT octet_length(data) FROM session_snapshots WHERE session_id = $1), 0)::bigint`,
		[]any{sessionID}, &old); err != nil {
		return persistence.Result{}, err
	}
	add := int64(len(snap.GetData())) - old
	if err := a.usage.Check(persistence.Charge{Session: sessionID, Bytes: add}); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(putSnapshotSQL, args...); err != nil {
		return persistence.Result{}, err
	}
	a.usage.AddSession(sessionID, add)
	return persistence.Result{}, nil
}

var putSnapshotSQL = sqlstore.Rebind(dialect{}, sqlstore.PutSnapshotSQL)

// ListMessagesWhere filters on the event time (the client's, else
// created_at); with Last it reads the session's tail backwards and
// returns it in sequence order. Without Last the byte cap applies as in
// ListMessages.
func (r *reader) ListMessagesWhere(ctx context.Context, f persistence.MessageFilter) ([]*sessionv1.Message, error) {
	if f.Last <= 0 && f.After == 0 && f.Before == 0 {
		return r.ListMessages(ctx, f.SessionID, f.From, f.Limit)
	}
	order, limit, capBytes, after, before := sqlstore.Window(f)
	rows, err := r.pool.Query(ctx, `SELECT `+pageColumns+`
		FROM (SELECT `+pageColumns+`,
			sum(octet_length(content) + octet_length(metadata_json) + $4) OVER (ORDER BY sequence `+order+`) AS upto,
			row_number() OVER (ORDER BY sequence `+order+`) AS n
			FROM session_messages WHERE session_id = $1 AND sequence >= $2
			AND (CASE WHEN event_at <> 0 THEN event_at ELSE created_at END) > $7
			AND (CASE WHEN event_at <> 0 THEN event_at ELSE created_at END) < $8
			AND NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = $1 AND state = $6)
			ORDER BY sequence `+order+` LIMIT $3) page
		WHERE upto <= $5 OR n = 1
		ORDER BY sequence`,
		f.SessionID, f.From, limit, persistence.MessageOverhead, capBytes, int64(persistence.SessionStateStaged), after, before)
	return messages(rows, err, f.SessionID)
}
