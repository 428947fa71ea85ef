package sqlstore

import (
	"context"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// SuffixOwn is the part of persistence.SuffixDialect that is a store's
// own: its lookup of stored ids, its removal and append paths, its audit.
type SuffixOwn interface {
	StoredIDs(sessionID string, ids []string) (map[string]int64, error)
	Cut(sessionID string, from, updatedAt int64) error
	Append(c *persistence.AppendMessages) (persistence.Result, error)
	Audit(entries []*auditv1.AuditEntry) error
	RememberRemoved(sessionID string, removed []persistence.RemovedID) error
	RemovedDigests(sessionID string, ids []string) (map[string]string, error)
}

// SuffixDialect is persistence.SuffixDialect of a store: the reads, run
// in its writer's transaction tx, and own. lock is the clause that locks
// the session's row as its head is read (PostgreSQL's " FOR UPDATE"), or
// "" where the transaction holds the whole database.
func SuffixDialect(tx DB, lock string, own SuffixOwn) persistence.SuffixDialect {
	return suffixDialect{SuffixReads{tx, lock}, own}
}

type suffixDialect struct {
	SuffixReads
	SuffixOwn
}

// SuffixReads are the reads of persistence.SuffixDialect (see
// SuffixDialect).
type SuffixReads struct {
	Tx   DB
	Lock string
}

// SuffixHead reads what a ReplaceSuffix is checked against.
func (r SuffixReads) SuffixHead(sessionID string) (next, first int64, closed bool, err error) {
	var state int64
	err = r.Tx.QueryRow(context.Background(), Rebind(r.Tx, `SELECT next_sequence, first_sequence, state FROM sessions
		WHERE session_id = ?`+r.Lock), []any{sessionID}, []any{&next, &first, &state})
	if r.Tx.NoRows(err) {
		return 0, 0, false, errs.NotFound("session %s not found", sessionID)
	}
	return next, first, state == int64(sessionv1.SessionState_SESSION_STATE_CLOSED), err
}

// MessagesFrom reads a session's messages with from <= sequence < to, in
// sequence order: what a ReplaceSuffix removes or finds stored.
func (r SuffixReads) MessagesFrom(sessionID string, from, to int64) ([]*sessionv1.Message, error) {
	var out []*sessionv1.Message
	var role, created, event int64
	m := &sessionv1.Message{}
	err := r.Tx.Query(context.Background(), Rebind(r.Tx, `SELECT sequence, message_id, role, content, metadata_json,
		created_at, event_at, item_key, kind
		FROM session_messages WHERE session_id = ? AND sequence >= ? AND sequence < ? ORDER BY sequence`),
		[]any{sessionID, from, to},
		[]any{&m.Sequence, &m.MessageId, &role, &m.Content, &m.MetadataJson, &created, &event, &m.ItemKey, &m.Kind},
		func() error {
			out = append(out, &sessionv1.Message{SessionId: sessionID, MessageId: m.MessageId, Sequence: m.Sequence,
				Role: sessionv1.Role(role), Content: m.Content, MetadataJson: m.MetadataJson,
				CreatedAt: persistence.Stamp(created), EventTime: persistence.Stamp(event), ItemKey: m.ItemKey, Kind: m.Kind})
			return nil
		})
	return out, err
}

// StoredAuditEntry returns the stored entry with eventID (nil when none)
// after flush wrote the audit rows the transaction tx queued, so that a
// retry finds its original in the same batch (persistence.ScopesDialect's
// StoredAudit).
func StoredAuditEntry(tx DB, flush func() error, eventID string) (*auditv1.AuditEntry, error) {
	if err := flush(); err != nil {
		return nil, err
	}
	stored, err := StoredAudit(context.Background(), tx, []string{eventID})
	return stored[eventID], err
}
