package sqlite

import (
	"database/sql"
	"errors"
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// ReplaceSuffix is decided by persistence.ApplyReplaceSuffix; the applier
// is its dialect. It runs after the attempt wrote what it pooled (Command),
// and stores its turn row by row, as a replay does, whatever the attempt.
func (a *applier) ReplaceSuffix(c *persistence.ReplaceSuffix) (persistence.Result, error) {
	return persistence.ApplyReplaceSuffix(c, suffixDialect{a})
}

type suffixDialect struct{ a *applier }

func (d suffixDialect) SuffixHead(id string) (next, first int64, closed bool, err error) {
	var state int64
	err = d.a.queryRow(`SELECT next_sequence, first_sequence, state FROM sessions WHERE session_id = ?`, id).Scan(&next, &first, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, errs.NotFound("session %s not found", id)
	}
	return next, first, state == int64(sessionv1.SessionState_SESSION_STATE_CLOSED), err
}

func (d suffixDialect) MessagesFrom(id string, from, to int64) ([]*sessionv1.Message, error) {
	rows, err := d.a.tx.QueryContext(d.a.ctx, `SELECT 0, `+pageColumns+`
		FROM session_messages WHERE session_id = ? AND sequence >= ? AND sequence < ? ORDER BY sequence`, id, from, to)
	return page(rows, err, id, false)
}

func (d suffixDialect) StoredIDs(id string, ids []string) (map[string]int64, error) {
	out := make(map[string]int64, len(ids))
	for _, mid := range ids {
		var seq int64
		err := d.a.queryRow(`SELECT sequence FROM message_rows WHERE message_id = ? AND session_id = ?`, mid, id).Scan(&seq)
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

func (d suffixDialect) Cut(id string, from, updatedAt int64) error {
	if _, err := d.a.deleteMessages(`session_id = ? AND sequence >= ?`, id, from); err != nil {
		return err
	}
	if _, err := d.a.exec(`DELETE FROM session_snapshots WHERE session_id = ? AND sequence >= ?`, id, from); err != nil {
		return err
	}
	_, err := d.a.exec(`UPDATE sessions SET next_sequence = ?, updated_at = ? WHERE session_id = ?`, from, updatedAt, id)
	return err
}

func (d suffixDialect) Append(c *persistence.AppendMessages) (persistence.Result, error) {
	return d.a.appendRows(c)
}

func (d suffixDialect) Audit(entries []*auditv1.AuditEntry) error { return d.a.audit(entries) }

func (d suffixDialect) RememberRemoved(id string, removed []persistence.RemovedID) error {
	d.a.removedTable = rowsSome
	for _, r := range removed {
		if _, err := d.a.exec(`INSERT INTO removed_message_ids (session_id, message_id, digest) VALUES (?, ?, ?)
			ON CONFLICT (session_id, message_id) DO UPDATE SET digest = excluded.digest`, id, r.MessageID, r.Digest); err != nil {
			return err
		}
	}
	return nil
}

func (d suffixDialect) RemovedDigests(id string, ids []string) (map[string]string, error) {
	out := make(map[string]string)
	for _, mid := range ids {
		var dg string
		err := d.a.queryRow(`SELECT digest FROM removed_message_ids WHERE session_id = ? AND message_id = ?`, id, mid).Scan(&dg)
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

// DeleteSessions is decided by persistence.ApplyDeleteSessions.
func (a *applier) DeleteSessions(c *persistence.DeleteSessions) (persistence.Result, error) {
	return persistence.ApplyDeleteSessions(c, groupDialect{a}, a)
}

type groupDialect struct{ *applier }

func (d groupDialect) GroupMembers(namespace, prefix string, limit int) ([]persistence.GroupMember, error) {
	w := sqlstore.NewWhere(dialect{})
	rows, err := d.tx.QueryContext(d.ctx, sqlstore.GroupQuery(w, namespace, prefix, limit), w.Args()...)
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

func (d groupDialect) Audit(entries []*auditv1.AuditEntry) error { return d.audit(entries) }

// UpdateScopes is decided by persistence.ApplyUpdateScopes.
func (a *applier) UpdateScopes(c *persistence.UpdateScopes) (persistence.Result, error) {
	return persistence.ApplyUpdateScopes(c, scopesDialect{a})
}

type scopesDialect struct{ *applier }

func (d scopesDialect) StoredAudit(eventID string) (*auditv1.AuditEntry, error) {
	// Queued entries first: a retry may follow its original in one batch.
	if err := d.flushAudit(); err != nil {
		return nil, err
	}
	stored, err := sqlstore.StoredAudit(d.ctx, txDB{a: d.applier}, []string{eventID})
	return stored[eventID], err
}

func (d scopesDialect) ComputeScopes(ds []persistence.ScopeDelta) ([]persistence.ScopeWrite, error) {
	ws, err := d.scopeStates(ds)
	out := make([]persistence.ScopeWrite, len(ws))
	for i, w := range ws {
		out[i] = persistence.ScopeWrite{Scope: w.scope, State: w.state}
	}
	return out, err
}

func (d scopesDialect) WriteScopes(ws []persistence.ScopeWrite, at int64) error {
	in := make([]scopeWrite, len(ws))
	for i, w := range ws {
		in[i] = scopeWrite{w.Scope, w.State}
	}
	return d.writeScopes(in, at)
}

func (d scopesDialect) Audit(entries []*auditv1.AuditEntry) error { return d.audit(entries) }

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
	digests, err := suffixDialect{a}.RemovedDigests(sessionID, persistence.MessageIDs(t.Messages))
	if err != nil {
		return nil, err
	}
	return persistence.ReusedRemovedID(sessionID, t.Messages, digests), nil
}
