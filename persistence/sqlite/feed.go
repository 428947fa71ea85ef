package sqlite

import (
	"context"
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
