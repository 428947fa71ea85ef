package persistence

import (
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
)

// RecordClientAudit appends audit entries whose event ids their clients
// chose (auditv1.RecordRequest.event_id), so that a client can resend one
// after a lost answer. Each event id is stored at most once: the store
// looks every id up inside its transaction, so the rule holds across
// transactions, restarts and writers, and also between entries of one
// command (a retry that caught up with its original in one batch).
//
// Its ResultOf has one outcome per entry, in order; an entry's conflict
// is its own outcome, not the command's, so the other entries commit.
type RecordClientAudit struct {
	Entries []*auditv1.AuditEntry
}

// RecordedAudit is the outcome of one entry of a RecordClientAudit.
type RecordedAudit struct {
	// Err is ALREADY_EXISTS, naming the id, when the event id is stored
	// with other content; nothing was stored for the entry.
	Err error
	// Duplicate: the event id was stored with the same content (see
	// SameAuditContent) and nothing was written; Entry is the stored
	// original, with its position, hash and created_at.
	Duplicate bool
	// Entry is the entry as stored: the command's own entry (its position
	// and hashes set at commit) or, for a duplicate, the original.
	Entry *auditv1.AuditEntry
}

func (c *RecordClientAudit) Size() int { return auditSize(c.Entries) }

// SameAuditContent reports whether a and b record the same event: the
// fields a client sends (event_type, plan_id, session_id, project_name,
// actor_name, user_identity, details_json as stored), and who sent them
// (principal): a retry by another principal is not the same event.
// created_at, position and the hashes are the node's, and differ between
// an original and its retry; the namespace follows from the session.
func SameAuditContent(a, b *auditv1.AuditEntry) bool {
	return a.GetEventType() == b.GetEventType() && a.GetPlanId() == b.GetPlanId() &&
		a.GetSessionId() == b.GetSessionId() && a.GetProjectName() == b.GetProjectName() &&
		a.GetActorName() == b.GetActorName() && a.GetUserIdentity() == b.GetUserIdentity() &&
		detailsOf(a) == detailsOf(b) && principalOf(a) == principalOf(b)
}

// principalOf is principal as stores keep it (PrepareEntry's default).
func principalOf(e *auditv1.AuditEntry) string {
	if p := e.GetPrincipal(); p != "" {
		return p
	}
	return principal.Embedded
}

// detailsOf is details_json as stores keep it: "" is stored as "{}".
func detailsOf(e *auditv1.AuditEntry) string {
	if d := e.GetDetailsJson(); d != "" {
		return d
	}
	return "{}"
}

// SplitClientAudit decides the fate of a RecordClientAudit's entries,
// given stored: the entries already stored under any of their ids
// (committed, or written earlier in the same transaction). It returns the
// entries to insert, in order, and every entry's outcome; an id repeated
// within entries is decided against its first occurrence. Stores call it
// inside the writer's transaction, after making every row written so far
// visible to their lookup.
func SplitClientAudit(entries []*auditv1.AuditEntry, stored map[string]*auditv1.AuditEntry) ([]*auditv1.AuditEntry, []RecordedAudit) {
	insert := make([]*auditv1.AuditEntry, 0, len(entries))
	out := make([]RecordedAudit, len(entries))
	seen := make(map[string]*auditv1.AuditEntry, len(entries))
	for i, e := range entries {
		id := e.GetEventId()
		orig, ok := stored[id]
		if !ok {
			orig, ok = seen[id]
		}
		switch {
		case !ok:
			insert = append(insert, e)
			if id != "" {
				seen[id] = e
			}
			out[i] = RecordedAudit{Entry: e}
		case SameAuditContent(orig, e):
			out[i] = RecordedAudit{Duplicate: true, Entry: orig}
		default:
			out[i] = RecordedAudit{Err: errs.AlreadyExists("audit event_id %s is stored already with other content", id)}
		}
	}
	return insert, out
}

// ClientAuditIDs are the event ids of entries, for a store's lookup.
func ClientAuditIDs(entries []*auditv1.AuditEntry) []string {
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		if id := e.GetEventId(); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}
