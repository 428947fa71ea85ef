package postgres

import (
	"context"
	"errors"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
)

// AuditBounds reads the chain row, which every transaction that writes
// audit entries locks and advances before it commits: its tail_position is
// the head of what is committed, and since the lock serializes those
// transactions, every position up to it is committed too.
func (r *reader) AuditBounds(ctx context.Context) (anchor, head int64, err error) {
	err = r.pool.QueryRow(ctx, `SELECT anchor_position, tail_position FROM audit_chain WHERE id = 1`).Scan(&anchor, &head)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, errs.Internal("audit bounds: the chain row is missing")
	}
	if err != nil {
		return 0, 0, storeErr("audit bounds", err)
	}
	return anchor, max(anchor, head), nil
}

func (r *reader) FeedAudit(ctx context.Context, f *persistence.FeedFilter, after, upto int64, limit int) ([]*auditv1.AuditEntry, error) {
	var q query
	q.cond("position > " + q.arg(after))
	q.cond("position <= " + q.arg(upto))
	if f != nil {
		if len(f.EventTypes) > 0 {
			q.cond("event_type = ANY(" + q.arg(f.EventTypes) + ")")
		}
		if f.SessionID != "" {
			q.cond("session_id = " + q.arg(f.SessionID) + " AND session_id <> ''")
		}
		if f.PlanID != "" {
			q.cond("plan_id = " + q.arg(f.PlanID) + " AND plan_id <> ''")
		}
		if f.ActorName != "" {
			q.cond("actor_name = " + q.arg(f.ActorName) + " AND actor_name <> ''")
		}
	}
	return r.audit(ctx, "SELECT "+auditColumns+" FROM audit_log"+q.whereClause()+
		" ORDER BY position LIMIT "+q.arg(persistence.ClampLimit(limit)), q.args...)
}
