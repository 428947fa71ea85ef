package postgres

import (
	"errors"
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
	"github.com/jackc/pgx/v5"
)

// ReplaceSuffix is decided by persistence.ApplyReplaceSuffix; the applier
// is its dialect. It is never pipelined: each step reads what the one
// before wrote.
func (a *applier) ReplaceSuffix(c *persistence.ReplaceSuffix) (persistence.Result, error) {
	if err := a.fence(persistence.OwnerSession, c.SessionID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	return persistence.ApplyReplaceSuffix(c, suffixDialect{a})
}

type suffixDialect struct{ a *applier }

func (d suffixDialect) SuffixHead(id string) (next, first int64, closed bool, err error) {
	var state int64
	err = d.a.queryRow(`SELECT next_sequence, first_sequence, state FROM sessions WHERE session_id = $1 FOR UPDATE`,
		[]any{id}, &next, &first, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, false, errs.NotFound("session %s not found", id)
	}
	return next, first, state == int64(sessionv1.SessionState_SESSION_STATE_CLOSED), err
}

func (d suffixDialect) MessagesFrom(id string, from, to int64) ([]*sessionv1.Message, error) {
	var out []*sessionv1.Message
	var role, created, event int64
	m := &sessionv1.Message{}
	err := d.a.forEachRow(`SELECT sequence, message_id, role, content, metadata_json, created_at, event_at, item_key, kind
		FROM session_messages WHERE session_id = $1 AND sequence >= $2 AND sequence < $3 ORDER BY sequence`,
		[]any{id, from, to}, []any{&m.Sequence, &m.MessageId, &role, &m.Content, &m.MetadataJson, &created, &event, &m.ItemKey, &m.Kind}, func() error {
			out = append(out, &sessionv1.Message{SessionId: id, MessageId: m.MessageId, Sequence: m.Sequence,
				Role: sessionv1.Role(role), Content: m.Content, MetadataJson: m.MetadataJson,
				CreatedAt: persistence.Stamp(created), EventTime: persistence.Stamp(event), ItemKey: m.ItemKey, Kind: m.Kind})
			return nil
		})
	return out, err
}

func (d suffixDialect) StoredIDs(id string, ids []string) (map[string]int64, error) {
	out := make(map[string]int64, len(ids))
	var mid string
	var seq int64
	err := d.a.forEachRow(`SELECT message_id, sequence FROM session_messages WHERE session_id = $1 AND message_id = ANY($2::text[])`,
		[]any{id, ids}, []any{&mid, &seq}, func() error {
			out[mid] = seq
			return nil
		})
	return out, err
}

func (d suffixDialect) Cut(id string, from, updatedAt int64) error {
	if _, err := d.a.exec(`DELETE FROM session_messages WHERE session_id = $1 AND sequence >= $2`, id, from); err != nil {
		return err
	}
	if _, err := d.a.exec(`DELETE FROM session_snapshots WHERE session_id = $1 AND sequence >= $2`, id, from); err != nil {
		return err
	}
	_, err := d.a.exec(`UPDATE sessions SET next_sequence = $2, updated_at = $3 WHERE session_id = $1`, id, from, updatedAt)
	return err
}

func (d suffixDialect) Append(c *persistence.AppendMessages) (persistence.Result, error) {
	return d.a.appendMessages(c)
}

func (d suffixDialect) Audit(entries []*auditv1.AuditEntry) error { return d.a.audit(entries) }

func (d suffixDialect) RememberRemoved(id string, removed []persistence.RemovedID) error {
	ids, digests := make([]string, len(removed)), make([]string, len(removed))
	for i, r := range removed {
		ids[i], digests[i] = r.MessageID, r.Digest
	}
	_, err := d.a.exec(`INSERT INTO removed_message_ids (session_id, message_id, digest)
		SELECT $1, m, g FROM unnest($2::text[], $3::text[]) AS u(m, g)
		ON CONFLICT (session_id, message_id) DO UPDATE SET digest = excluded.digest`, id, ids, digests)
	return err
}

func (d suffixDialect) RemovedDigests(id string, ids []string) (map[string]string, error) {
	out := make(map[string]string)
	var mid, dg string
	err := d.a.forEachRow(`SELECT message_id, digest FROM removed_message_ids WHERE session_id = $1 AND message_id = ANY($2::text[])`,
		[]any{id, ids}, []any{&mid, &dg}, func() error {
			out[mid] = dg
			return nil
		})
	return out, err
}

// DeleteSessions is decided by persistence.ApplyDeleteSessions; each
// session's owner row is locked as its epoch is taken, in session_id
// order.
func (a *applier) DeleteSessions(c *persistence.DeleteSessions) (persistence.Result, error) {
	return persistence.ApplyDeleteSessions(c, groupDialect{a}, a)
}

type groupDialect struct{ *applier }

func (d groupDialect) GroupMembers(namespace, prefix string, limit int) ([]persistence.GroupMember, error) {
	var out []persistence.GroupMember
	var m persistence.GroupMember
	var key string
	w := sqlstore.NewWhere(dialect{})
	err := d.forEachRow(sqlstore.GroupQuery(w, namespace, prefix, limit), w.Args(),
		[]any{&m.SessionID, &m.ActorName, &m.Messages, &key}, func() error {
			if strings.HasPrefix(key, prefix) {
				out = append(out, m)
			}
			return nil
		})
	sqlstore.SortGroup(out)
	return out, err
}

func (d groupDialect) Audit(entries []*auditv1.AuditEntry) error { return d.audit(entries) }

// UpdateScopes is decided by persistence.ApplyUpdateScopes; the scopes'
// rows are locked in name order (lockScopes).
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
	ws, bad, err := d.scopeStates(ds)
	if err == nil {
		err = bad
	}
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
