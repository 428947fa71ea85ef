package sqlite

import (
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
)

// lookupChunk bounds the ids of one lookup statement, far below SQLite's
// limit on bound parameters.
const lookupChunk = 256

// RecordClientAudit stores the entries of c whose event ids are not
// stored yet and answers the others as duplicates or conflicts
// (persistence.SplitClientAudit). The lookup runs inside the writer's
// transaction, after the rows queued for multi-row inserts are written,
// so it sees every entry committed before and every one written earlier
// in this transaction: an id is stored once in both the buffered attempt
// and the replay with savepoints.
func (a *applier) RecordClientAudit(c *persistence.RecordClientAudit) (persistence.Result, error) {
	if err := a.flushAudit(); err != nil {
		return persistence.Result{}, err
	}
	stored, err := a.storedAudit(persistence.ClientAuditIDs(c.Entries))
	if err != nil {
		return persistence.Result{}, err
	}
	insert, out := persistence.SplitClientAudit(c.Entries, stored)
	if err := a.audit(insert); err != nil {
		return persistence.Result{}, err
	}
	return persistence.Result{Recorded: out}, nil
}

// storedAudit returns the stored entries among ids, by event id.
func (a *applier) storedAudit(ids []string) (map[string]*auditv1.AuditEntry, error) {
	stored := make(map[string]*auditv1.AuditEntry)
	for len(ids) > 0 {
		n := min(len(ids), lookupChunk)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		ids = ids[n:]
		query := "SELECT " + auditColumns + " FROM audit_log WHERE event_id IN (?" + strings.Repeat(", ?", n-1) + ")"
		rows, err := a.tx.QueryContext(a.ctx, query, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			e := &auditv1.AuditEntry{}
			var created int64
			if err := rows.Scan(&e.Position, &e.EventId, &e.EventType, &e.PlanId, &e.SessionId, &e.ProjectName,
				&e.ActorName, &e.UserIdentity, &e.DetailsJson, &created, &e.PrevHash, &e.Hash); err != nil {
				_ = rows.Close()
				return nil, err
			}
			e.CreatedAt = persistence.Stamp(created)
			stored[e.EventId] = e
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return stored, nil
}
