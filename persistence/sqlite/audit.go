package sqlite

import (
	auditv1 "github.com/agentstate/agentstate/messages/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	sqlite3 "github.com/mattn/go-sqlite3"
)

const insertAuditSQL = `INSERT INTO audit_log (position, event_id, event_type, plan_id, session_id,
	project_name, actor_name, user_identity, details_json, created_at, prev_hash, hash)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// audit appends entries to the chain: each gets the next position, the
// current tail's hash as PrevHash, and its own Hash.
func (a *applier) audit(entries []*auditv1.AuditEntry) error {
	for _, e := range entries {
		switch {
		case e == nil:
			return errs.InvalidArgument("audit entry is nil")
		case e.GetEventId() == "":
			return errs.InvalidArgument("audit entry has no event_id")
		case e.GetEventType() == "":
			return errs.InvalidArgument("audit entry %s has no event_type", e.GetEventId())
		case e.GetCreatedAt() == nil:
			return errs.InvalidArgument("audit entry %s has no created_at", e.GetEventId())
		case e.GetPosition() != 0:
			return errs.InvalidArgument("audit entry %s is committed already (position %d)", e.GetEventId(), e.GetPosition())
		}
		details := e.GetDetailsJson()
		if details == "" {
			details = "{}"
			e.DetailsJson = details
		}
		// Assigned before the insert so that restore unassigns it if the
		// insert fails.
		e.Position = a.pos + 1
		e.PrevHash = a.hash
		e.Hash = persistence.AuditHash(a.hash, e)
		a.assigned = append(a.assigned, e)
		_, err := a.exec(insertAuditSQL, e.Position, e.EventId, e.EventType, e.PlanId, e.SessionId,
			e.ProjectName, e.ActorName, e.UserIdentity, details, tsNanos(e.CreatedAt), e.PrevHash, e.Hash)
		if err != nil {
			if c := constraint(err); c == sqlite3.ErrConstraintUnique || c == sqlite3.ErrConstraintPrimaryKey {
				return errs.AlreadyExists("audit entry %s is stored already", e.EventId)
			}
			return err
		}
		a.pos, a.hash = e.Position, e.Hash
	}
	return nil
}

// pruneAudit removes the oldest entries, in position order, while they were
// created before OlderThan, at most Limit. Only a prefix of the chain goes,
// so the rest stays verifiable from the anchor: the last removed entry's
// hash and position, kept in audit_meta.
func (a *applier) pruneAudit(c *persistence.PruneAudit) (persistence.Result, error) {
	if c.Limit <= 0 {
		return persistence.Result{}, errs.InvalidArgument("prune limit %d; want at least 1", c.Limit)
	}
	if c.OlderThan.IsZero() {
		return persistence.Result{}, errs.InvalidArgument("prune has no older_than")
	}
	cutoff := c.OlderThan.UnixNano()
	rows, err := a.tx.QueryContext(a.ctx, `SELECT position, created_at, hash FROM audit_log ORDER BY position LIMIT ?`, c.Limit)
	if err != nil {
		return persistence.Result{}, err
	}
	var removed, lastPos int64
	var lastHash string
	for rows.Next() {
		var pos, created int64
		var hash string
		if err := rows.Scan(&pos, &created, &hash); err != nil {
			rows.Close()
			return persistence.Result{}, err
		}
		if created >= cutoff {
			break
		}
		removed, lastPos, lastHash = removed+1, pos, hash
	}
	if err := rows.Close(); err != nil {
		return persistence.Result{}, err
	}
	if err := rows.Err(); err != nil {
		return persistence.Result{}, err
	}
	if removed > 0 {
		if _, err := a.exec(`DELETE FROM audit_log WHERE position <= ?`, lastPos); err != nil {
			return persistence.Result{}, err
		}
		if _, err := a.exec(`INSERT INTO audit_meta (id, anchor_hash, anchor_position) VALUES (1, ?, ?)
			ON CONFLICT (id) DO UPDATE SET anchor_hash = excluded.anchor_hash, anchor_position = excluded.anchor_position`,
			lastHash, lastPos); err != nil {
			return persistence.Result{}, err
		}
	}
	if err := a.audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.Result{Removed: removed}, nil
}
