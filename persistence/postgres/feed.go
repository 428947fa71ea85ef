package postgres

import (
	"context"
	"errors"

	"github.com/agentstate/agentstate/messages/errs"
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
