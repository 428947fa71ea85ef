package postgres

import (
	"context"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/jackc/pgx/v5"
)

// AuditBounds finds a head below which every position is settled: each
// entry at or below it is committed, and none will ever be.
//
// With one chain, that is its tail: its lock serializes the writers, and
// positions are dense. With several, writers of different chains commit
// in any order, so it is the least of:
//   - the tail of every chain a writer holds now (its lock is taken): that
//     writer's entries land past its chain's tail;
//   - the highest tail of all: a writer that takes a chain after this
//     read starts past it (persistence.NextChainPosition's floor).
//
// The chain locks are tried, shared, in the same statement that reads the
// tails, within a read-only transaction that ends at once: a writer that
// wants one waits only that long, and the reader never waits. A writer
// whose lock was free when tried had committed (its entries are visible
// to the next statement) or has not begun (its entries land past every
// tail read here). The anchor is the highest prune point of any chain.
//
// The least busy tail may lie below a head reported before: a writer
// that takes a chain idle for a while holds a tail that lags the others
// (its entries still land past the floor). What was settled stays
// settled, so this reader never reports less than it did (settled); a
// reader of another node may, for as long as that writer's transaction.
func (r *reader) AuditBounds(ctx context.Context) (anchor, head int64, err error) {
	tx, err := r.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, 0, storeErr("audit bounds", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, `SELECT tail_position, anchor_position,
		pg_try_advisory_xact_lock_shared($1::int4, chain::int4) FROM audit_chains ORDER BY chain`, auditLockClass)
	if err != nil {
		return 0, 0, storeErr("audit bounds", err)
	}
	var tail, anch, top int64
	busy := int64(-1)
	var free bool
	n := 0
	_, err = pgx.ForEachRow(rows, []any{&tail, &anch, &free}, func() error {
		n++
		anchor, top = max(anchor, anch), max(top, tail)
		if !free && (busy < 0 || tail < busy) {
			busy = tail
		}
		return nil
	})
	if err != nil {
		return 0, 0, storeErr("audit bounds", err)
	}
	if n == 0 {
		return 0, 0, errs.Internal("audit bounds: the chain rows are missing")
	}
	head = top
	if busy >= 0 && n > 1 {
		head = busy
	}
	head = max(anchor, head)
	for {
		prev := r.settled.Load()
		if head <= prev {
			return anchor, prev, nil
		}
		if r.settled.CompareAndSwap(prev, head) {
			return anchor, head, nil
		}
	}
}
