package sqlstore

import (
	"context"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// SuffixHead reads what a ReplaceSuffix is checked against
// (persistence.SuffixDialect) in the writer's transaction tx; lock is the
// clause that locks the session's row (PostgreSQL's FOR UPDATE), or ""
// where the transaction holds the whole database.
func SuffixHead(tx DB, sessionID, lock string) (next, first int64, closed bool, err error) {
	var state int64
	err = tx.QueryRow(context.Background(), Rebind(tx, `SELECT next_sequence, first_sequence, state FROM sessions
		WHERE session_id = ?`+lock), []any{sessionID}, []any{&next, &first, &state})
	if tx.NoRows(err) {
		return 0, 0, false, errs.NotFound("session %s not found", sessionID)
	}
	return next, first, state == int64(sessionv1.SessionState_SESSION_STATE_CLOSED), err
}

// MessagesFrom reads a session's messages with from <= sequence < to, in
// sequence order, in the writer's transaction tx: what a ReplaceSuffix
// removes or finds stored (persistence.SuffixDialect).
func MessagesFrom(tx DB, sessionID string, from, to int64) ([]*sessionv1.Message, error) {
	var out []*sessionv1.Message
	var role, created, event int64
	m := &sessionv1.Message{}
	err := tx.Query(context.Background(), Rebind(tx, `SELECT sequence, message_id, role, content, metadata_json,
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
