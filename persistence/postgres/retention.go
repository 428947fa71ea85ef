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
	tag, err := a.exec(`DELETE FROM session_messages WHERE session_id = $1 AND sequence <= $2`, c.SessionID, cut)
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
	return persistence.RemovedResult{Removed: tag.RowsAffected()}.Result(), nil
}

func (a *applier) PutSnapshot(c *persistence.PutSnapshot) (persistence.Result, error) {
	if err := a.fence(persistence.OwnerSession, c.SessionID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.lockSession(c.SessionID); err != nil {
		return persistence.Result{}, err
	}
	if c.Snapshot == nil {
		tag, err := a.exec(`DELETE FROM session_snapshots WHERE session_id = $1 AND sequence <= $2`, c.SessionID, c.DeleteThrough)
		if err != nil {
			return persistence.Result{}, err
		}
		return persistence.RemovedResult{Removed: tag.RowsAffected()}.Result(), nil
	}
	return a.putSnapshot(c.SessionID, c.Snapshot)
}

func (a *applier) putSnapshot(sessionID string, snap *sessionv1.Snapshot) (persistence.Result, error) {
	args, err := sqlstore.SnapshotArgs(sessionID, snap)
	if err == nil {
		_, err = a.exec(putSnapshotSQL, args...)
	}
	return persistence.Result{}, err
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
