package postgres

import (
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// The history operations are decided in persistence (ApplyReplaceSuffix,
// ApplyDeleteSessions, ApplyUpdateScopes); the applier is their dialect,
// with sqlstore's shared reads for ReplaceSuffix (sqlstore.SuffixDialect).
// ReplaceSuffix is never pipelined: each step reads what the one before
// wrote. DeleteSessions locks each session's owner row as its epoch is
// taken, in session_id order; UpdateScopes locks the scopes' rows in name
// order (lockScopes).

func (a *applier) ReplaceSuffix(c *persistence.ReplaceSuffix) (persistence.Result, error) {
	if err := a.fence(persistence.OwnerSession, c.SessionID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	return persistence.ApplyReplaceSuffix(c, sqlstore.SuffixDialect(txDB{a: a}, " FOR UPDATE", a))
}

// StoredIDs looks the ids up in one statement.
func (a *applier) StoredIDs(id string, ids []string) (map[string]int64, error) {
	out := make(map[string]int64, len(ids))
	var mid string
	var seq int64
	err := a.forEachRow(`SELECT message_id, sequence FROM session_messages WHERE session_id = $1 AND message_id = ANY($2::text[])`,
		[]any{id, ids}, []any{&mid, &seq}, func() error {
			out[mid] = seq
			return nil
		})
	return out, err
}

// Cut: see persistence.SuffixDialect.
func (a *applier) Cut(id string, from, updatedAt int64) error {
	for _, stmt := range []string{
		`DELETE FROM session_messages WHERE session_id = $1 AND sequence >= $2 RETURNING ` + messageBytesSQL + ` AS n`,
		`DELETE FROM session_snapshots WHERE session_id = $1 AND sequence >= $2 RETURNING octet_length(data) AS n`,
	} {
		if _, err := a.deleteCounted(id, stmt, id, from); err != nil {
			return err
		}
	}
	_, err := a.exec(`UPDATE sessions SET next_sequence = $2, updated_at = $3 WHERE session_id = $1`, id, from, updatedAt)
	return err
}

func (a *applier) Append(c *persistence.AppendMessages) (persistence.Result, error) {
	return a.appendMessages(c)
}

// RememberRemoved: see persistence.SuffixDialect.
func (a *applier) RememberRemoved(id string, removed []persistence.RemovedID) error {
	ids, digests := make([]string, len(removed)), make([]string, len(removed))
	for i, r := range removed {
		ids[i], digests[i] = r.MessageID, r.Digest
	}
	_, err := a.exec(`INSERT INTO removed_message_ids (session_id, message_id, digest)
		SELECT $1, m, g FROM unnest($2::text[], $3::text[]) AS u(m, g)
		ON CONFLICT (session_id, message_id) DO UPDATE SET digest = excluded.digest`, id, ids, digests)
	return err
}

// RemovedDigests: see persistence.SuffixDialect.
func (a *applier) RemovedDigests(id string, ids []string) (map[string]string, error) {
	out := make(map[string]string)
	var mid, dg string
	err := a.forEachRow(`SELECT message_id, digest FROM removed_message_ids WHERE session_id = $1 AND message_id = ANY($2::text[])`,
		[]any{id, ids}, []any{&mid, &dg}, func() error {
			out[mid] = dg
			return nil
		})
	return out, err
}

func (a *applier) DeleteSessions(c *persistence.DeleteSessions) (persistence.Result, error) {
	return persistence.ApplyDeleteSessions(c, a, a)
}

// GroupMembers: see persistence.GroupDialect.
func (a *applier) GroupMembers(namespace, prefix string, limit int) ([]persistence.GroupMember, error) {
	var out []persistence.GroupMember
	var m persistence.GroupMember
	var key string
	w := sqlstore.NewWhere(dialect{})
	err := a.forEachRow(sqlstore.GroupQuery(w, namespace, prefix, limit), w.Args(),
		[]any{&m.SessionID, &m.ActorName, &m.Messages, &key}, func() error {
			if strings.HasPrefix(key, prefix) {
				out = append(out, m)
			}
			return nil
		})
	sqlstore.SortGroup(out)
	return out, err
}

func (a *applier) UpdateScopes(c *persistence.UpdateScopes) (persistence.Result, error) {
	return persistence.ApplyUpdateScopes(c, persistence.CheckedScopes(a, a.usage))
}

// StoredAudit: see persistence.ScopesDialect.
func (a *applier) StoredAudit(eventID string) (*auditv1.AuditEntry, error) {
	return sqlstore.StoredAuditEntry(txDB{a: a}, a.flushAudit, eventID)
}
