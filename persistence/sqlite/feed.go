package sqlite

import (
	"context"
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
)

// AuditBounds reads anchor and head in one statement, so in one snapshot:
// a head never lies below an anchor a concurrent prune just moved.
func (r *reader) AuditBounds(ctx context.Context) (anchor, head int64, err error) {
	err = r.db.QueryRowContext(ctx, `SELECT
		COALESCE((SELECT anchor_position FROM audit_meta WHERE id = 1), 0),
		COALESCE((SELECT MAX(position) FROM audit_log), 0)`).Scan(&anchor, &head)
	if err != nil {
		return 0, 0, storeErr("audit bounds", err)
	}
	return anchor, max(anchor, head), nil
}

func (r *reader) FeedAudit(ctx context.Context, f *persistence.FeedFilter, after, upto int64, limit int) ([]*auditv1.AuditEntry, error) {
	where := []string{"position > ?", "position <= ?"}
	args := []any{after, upto}
	if f != nil {
		if len(f.EventTypes) > 0 {
			where = append(where, "event_type IN (?"+strings.Repeat(", ?", len(f.EventTypes)-1)+")")
			for _, t := range f.EventTypes {
				args = append(args, t)
			}
		}
		// The optional columns repeat their partial index's condition.
		if f.SessionID != "" {
			where, args = append(where, "session_id = ? AND session_id != ''"), append(args, f.SessionID)
		}
		if f.PlanID != "" {
			where, args = append(where, "plan_id = ? AND plan_id != ''"), append(args, f.PlanID)
		}
		if f.ActorName != "" {
			where, args = append(where, "actor_name = ? AND actor_name != ''"), append(args, f.ActorName)
		}
	}
	return r.audit(ctx, "SELECT "+auditColumns+" FROM audit_log"+whereClause(where)+" ORDER BY position LIMIT ?",
		append(args, persistence.ClampLimit(limit))...)
}
