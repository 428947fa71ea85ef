package sqlite

import (
	"database/sql"
	"errors"
	"strings"

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
	_, err := a.deleteMessages(id, `session_id = ? AND sequence >= ?`, id, from)
	if err == nil {
		err = a.deleteSnapshot(id, `session_id = ? AND sequence >= ?`, id, from)
	}
	if err == nil {
		_, err = a.exec(`UPDATE sessions SET next_sequence = ?, updated_at = ? WHERE session_id = ?`, from, updatedAt, id)
	}
	return err
}

func (a *applier) Append(c *persistence.AppendMessages) (persistence.Result, error) {
	return a.appendRows(c)
}

// RememberRemoved: see persistence.SuffixDialect.
func (a *applier) RememberRemoved(id string, removed []persistence.RemovedID) error {
	a.removedTable = rowsSome
	for _, r := range removed {
		if _, err := a.exec(`INSERT INTO removed_message_ids (session_id, message_id, digest) VALUES (?, ?, ?)
			ON CONFLICT (session_id, message_id) DO UPDATE SET digest = excluded.digest`, id, r.MessageID, r.Digest); err != nil {
			return err
		}
	}
	return nil
}

// RemovedDigests: see persistence.SuffixDialect.
func (a *applier) RemovedDigests(id string, ids []string) (map[string]string, error) {
	out := make(map[string]string)
	for _, mid := range ids {
		var dg string
		err := a.queryRow(`SELECT digest FROM removed_message_ids WHERE session_id = ? AND message_id = ?`, id, mid).Scan(&dg)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue
		case err != nil:
			return nil, err
		}
		out[mid] = dg
	}
	return out, nil
}

func (a *applier) DeleteSessions(c *persistence.DeleteSessions) (persistence.Result, error) {
	return persistence.ApplyDeleteSessions(c, a, a)
}

// GroupMembers: see persistence.GroupDialect.
func (a *applier) GroupMembers(namespace, prefix string, limit int) ([]persistence.GroupMember, error) {
	w := sqlstore.NewWhere(dialect{})
	rows, err := a.tx.QueryContext(a.ctx, sqlstore.GroupQuery(w, namespace, prefix, limit), w.Args()...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []persistence.GroupMember
	for rows.Next() {
		var m persistence.GroupMember
		var key string
		if err := rows.Scan(&m.SessionID, &m.ActorName, &m.Messages, &key); err != nil {
			return nil, err
		}
		if strings.HasPrefix(key, prefix) {
			out = append(out, m)
		}
	}
	sqlstore.SortGroup(out)
	return out, rows.Err()
}

func (a *applier) UpdateScopes(c *persistence.UpdateScopes) (persistence.Result, error) {
	return persistence.ApplyUpdateScopes(c, persistence.CheckedScopes(a, a.usage))
}

// StoredAudit: see persistence.ScopesDialect.
func (a *applier) StoredAudit(eventID string) (*auditv1.AuditEntry, error) {
	return sqlstore.StoredAuditEntry(txDB{a: a}, a.flushAudit, eventID)
}

type tableRows int8

const (
	rowsUnknown tableRows = iota
	rowsNone
	rowsSome
)

// hasRemovedIDs tells whether a replacement removed ids of the session:
// the gate of removedReuse. While no replacement removed any id in the
// database, a transaction pays one probe in all; else one probe of
// removed_message_ids' key per append command.
func (a *applier) hasRemovedIDs(sessionID string) (bool, error) {
	if a.removedTable == rowsUnknown {
		var n int64
		if err := a.queryRow(`SELECT EXISTS (SELECT 1 FROM removed_message_ids)`).Scan(&n); err != nil {
			return false, err
		}
		a.removedTable = rowsNone
		if n != 0 {
			a.removedTable = rowsSome
		}
	}
	if a.removedTable == rowsNone {
		return false, nil
	}
	var n int64
	err := a.queryRow(`SELECT EXISTS (SELECT 1 FROM removed_message_ids WHERE session_id = ?)`, sessionID).Scan(&n)
	return n != 0, err
}

// removedReuse is the turn-level error of a turn that uses a removed id
// with other content (persistence.ReusedRemovedID), or nil.
func (a *applier) removedReuse(sessionID string, t *persistence.Turn) (error, error) {
	digests, err := a.RemovedDigests(sessionID, persistence.MessageIDs(t.Messages))
	if err != nil {
		return nil, err
	}
	return persistence.ReusedRemovedID(sessionID, t.Messages, digests), nil
}
