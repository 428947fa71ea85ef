package sqlite

import (
	"database/sql"
	"errors"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// The history operations are decided in persistence (ApplyReplaceSuffix,
// ApplyDeleteSessions, ApplyUpdateScopes); the applier is their dialect,
// with sqlstore's shared reads for ReplaceSuffix (sqlstore.SuffixDialect).
// ReplaceSuffix runs after the attempt wrote what it pooled (Command),
// and stores its turn row by row, as a replay does, whatever the attempt.

func (a *applier) ReplaceSuffix(c *persistence.ReplaceSuffix) (persistence.Result, error) {
	return persistence.ApplyReplaceSuffix(c, sqlstore.SuffixDialect(txDB{a: a}, "", a))
}

// StoredIDs probes the (message_id, session_id) key once per id.
func (a *applier) StoredIDs(id string, ids []string) (map[string]int64, error) {
	out := make(map[string]int64, len(ids))
	for _, mid := range ids {
		var seq int64
		err := a.queryRow(`SELECT sequence FROM message_rows WHERE message_id = ? AND session_id = ?`, mid, id).Scan(&seq)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue
		case err != nil:
			return nil, err
		}
		out[mid] = seq
	}
	return out, nil
}

// Cut: see persistence.SuffixDialect. Messages go through message_rows
// (deleteMessages), whose triggers clear their index entries.
func (a *applier) Cut(id string, from, updatedAt int64) error {
	_, err := a.deleteMessages(`session_id = ? AND sequence >= ?`, id, from)
	if err == nil {
		_, err = a.exec(`DELETE FROM session_snapshots WHERE session_id = ? AND sequence >= ?`, id, from)
	}
	if err == nil {
		_, err = a.exec(`UPDATE sessions SET next_sequence = ?, updated_at = ? WHERE session_id = ?`, from, updatedAt, id)
	}
	return err
}

func (a *applier) Append(c *persistence.AppendMessages) (persistence.Result, error) {
	return a.appendRows(c)
}

func (a *applier) DeleteSessions(c *persistence.DeleteSessions) (persistence.Result, error) {
	return persistence.ApplyDeleteSessions(c, a, a)
}

// GroupMembers: see persistence.GroupDialect.
func (a *applier) GroupMembers(namespace, prefix string, limit int) ([]persistence.GroupMember, error) {
	rows, err := a.tx.QueryContext(a.ctx, `SELECT session_id, actor_name, next_sequence FROM sessions
		WHERE namespace = ?1 AND client_key != '' AND substr(client_key, 1, length(?2)) = ?2 AND state != ?3
		ORDER BY session_id LIMIT ?4`, namespace, prefix, int64(persistence.SessionStateStaged), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []persistence.GroupMember
	for rows.Next() {
		var m persistence.GroupMember
		if err := rows.Scan(&m.SessionID, &m.ActorName, &m.Messages); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

func (a *applier) UpdateScopes(c *persistence.UpdateScopes) (persistence.Result, error) {
	return persistence.ApplyUpdateScopes(c, a)
}

// StoredAudit: see persistence.ScopesDialect.
func (a *applier) StoredAudit(eventID string) (*auditv1.AuditEntry, error) {
	return sqlstore.StoredAuditEntry(txDB{a: a}, a.flushAudit, eventID)
}
