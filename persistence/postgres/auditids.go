package postgres

import (
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
)

// RecordClientAudit stores the entries of c whose event ids are not
// stored yet and answers the others as duplicates or conflicts
// (persistence.SplitClientAudit). The lookup runs inside the writer's
// transaction, which holds the chain lock (needsChain), after the audit
// rows queued so far are written: it sees every entry committed before —
// by this node or another writer on the database, which must take the same
// lock to add one — and every one written earlier in this transaction.
func (a *applier) RecordClientAudit(c *persistence.RecordClientAudit) (persistence.Result, error) {
	if err := a.flushAudit(); err != nil {
		return persistence.Result{}, err
	}
	stored := make(map[string]*auditv1.AuditEntry)
	var e auditv1.AuditEntry
	var created int64
	err := a.forEachRow("SELECT "+auditColumns+" FROM audit_log WHERE event_id = ANY($1::text[])",
		[]any{persistence.ClientAuditIDs(c.Entries)},
		[]any{&e.Position, &e.EventId, &e.EventType, &e.PlanId, &e.SessionId, &e.ProjectName,
			&e.ActorName, &e.UserIdentity, &e.DetailsJson, &created, &e.PrevHash, &e.Hash},
		func() error {
			stored[e.EventId] = &auditv1.AuditEntry{Position: e.Position, EventId: e.EventId, EventType: e.EventType,
				PlanId: e.PlanId, SessionId: e.SessionId, ProjectName: e.ProjectName, ActorName: e.ActorName,
				UserIdentity: e.UserIdentity, DetailsJson: e.DetailsJson, CreatedAt: persistence.Stamp(created),
				PrevHash: e.PrevHash, Hash: e.Hash}
			return nil
		})
	if err != nil {
		return persistence.Result{}, err
	}
	insert, out := persistence.SplitClientAudit(c.Entries, stored)
	if err := a.audit(insert); err != nil {
		return persistence.Result{}, err
	}
	return persistence.Result{Recorded: out}, nil
}
