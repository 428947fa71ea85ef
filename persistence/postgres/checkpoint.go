package postgres

import (
	"context"
	"time"

	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Checkpoints (persistence.AuditCheckpoint) are rows of
// audit_checkpoints, numbered densely by seq. Who writes them, and why
// that brings back no lock anyone waits on:
//
//   - a writer transaction that holds chains writes one in its last round
//     trip (finish) when its Store's last one is checkpointEvery
//     transactions or checkpointInterval old. It only tries the
//     checkpoint lock (pg_try_advisory_xact_lock): if another writer is
//     writing one, this one writes none, and never waits. The transaction
//     is no longer for it by more than one INSERT;
//   - PartitionAudit, with the chains it adds, and CheckpointAudit, which
//     wait for the lock (they are rare, and outside any writer's batch).
//
// The INSERT reads the heads after taking the lock, in a statement of its
// own snapshot, so it sees the previous checkpoint's transaction
// committed and every head it named: a checkpoint's heads are at or past
// its predecessor's. A statement whose snapshot predates the previous
// holder's commit computes that holder's seq again and inserts nothing
// (ON CONFLICT DO NOTHING), again without waiting: only the lock's holder
// has an uncommitted checkpoint row.
//
// So a chain's newest entries committed after the latest checkpoint (at
// most checkpointEvery transactions of each writer, or checkpointInterval)
// can be cut off together with a rewound head row without Verify seeing
// it; everything a checkpoint names cannot.
const checkpointLockClass int32 = 0x636b7074 // "ckpt"

const (
	checkpointEvery    = 64
	checkpointInterval = time.Second
)

// checkpointSQL writes the next checkpoint if it gets the lock ($2, 0)
// ($1: created_at). Its digest is persistence.CheckpointDigest of the same
// bytes.
const checkpointSQL = `INSERT INTO audit_checkpoints (seq, positions, hashes, prev_digest, digest, created_at)
SELECT k.seq, h.positions, h.hashes, k.prev,
	encode(sha256(convert_to('agentstate audit checkpoint' || E'\n' || k.seq || E'\n' || k.prev || E'\n' || h.body, 'UTF8')), 'hex'),
	$1::bigint
FROM (SELECT array_agg(tail_position ORDER BY chain) AS positions, array_agg(tail_hash ORDER BY chain) AS hashes,
		string_agg(chain || ' ' || tail_position || ' ' || tail_hash || E'\n', '' ORDER BY chain) AS body
	FROM audit_chains) h,
	(SELECT COALESCE(max(seq), 0) + 1 AS seq,
		COALESCE((SELECT digest FROM audit_checkpoints ORDER BY seq DESC LIMIT 1), '') AS prev
	FROM audit_checkpoints) k
WHERE h.positions IS NOT NULL AND pg_try_advisory_xact_lock($2::int4, 0)
ON CONFLICT (seq) DO NOTHING`

// checkpointDue reports whether this Store's next chain transaction writes
// a checkpoint. Called with wmu held.
func (s *Store) checkpointDue() bool {
	return s.sinceCheckpoint+1 >= checkpointEvery || time.Since(s.lastCheckpoint) >= checkpointInterval
}

// committedChains counts a committed transaction that held chains;
// checkpointed: it wrote a checkpoint. Called with wmu held.
func (s *Store) committedChains(checkpointed bool) {
	s.sinceCheckpoint++
	if checkpointed {
		s.sinceCheckpoint, s.lastCheckpoint = 0, time.Now()
	}
}

// queueCheckpoint queues checkpointSQL into the transaction's pipeline;
// a.checkpointed reports whether it wrote one (it did not when another
// writer held the lock).
func (a *applier) queueCheckpoint() {
	a.queue(checkpointSQL, time.Now().UnixNano(), checkpointLockClass).Exec(func(tag pgconn.CommandTag) error {
		a.checkpointed = tag.RowsAffected() == 1
		return nil
	})
}

// CheckpointAudit writes a checkpoint of every chain's committed head now,
// waiting for the checkpoint lock if a writer holds it.
func (s *Store) CheckpointAudit(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	conn, err := s.liveConn(ctx)
	if err != nil {
		return err
	}
	return storeErr("checkpoint the audit trail", pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return checkpointIn(ctx, tx)
	}))
}

// checkpointIn takes the checkpoint lock in tx, waiting, and writes a
// checkpoint.
func checkpointIn(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, 0)`, checkpointLockClass); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, checkpointSQL, time.Now().UnixNano(), checkpointLockClass)
	return err
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// AuditHeadsAndCheckpoint reads the heads and the latest checkpoint in one
// read-only REPEATABLE READ transaction: the checkpoint's heads are at or
// below the heads read with it.
func (r *reader) AuditHeadsAndCheckpoint(ctx context.Context) ([]persistence.ChainHead, *persistence.AuditCheckpoint, error) {
	tx, err := r.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, storeErr("audit chain heads", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	heads, err := chainHeads(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	cps, err := checkpoints(ctx, tx, `ORDER BY seq DESC LIMIT 1`)
	if err != nil || len(cps) == 0 {
		return heads, nil, err
	}
	return heads, cps[0], nil
}

// AuditCheckpoints reads checkpoints in seq order.
func (r *reader) AuditCheckpoints(ctx context.Context, after, upto int64, limit int) ([]*persistence.AuditCheckpoint, error) {
	return checkpoints(ctx, r.pool, `WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3`, after, upto, persistence.ClampLimit(limit))
}

func checkpoints(ctx context.Context, q querier, where string, args ...any) ([]*persistence.AuditCheckpoint, error) {
	rows, err := q.Query(ctx, `SELECT seq, positions, hashes, prev_digest, digest FROM audit_checkpoints `+where, args...)
	if err != nil {
		return nil, storeErr("audit checkpoints", err)
	}
	var out []*persistence.AuditCheckpoint
	var seq int64
	var positions []int64
	var hashes []string
	var prev, digest string
	_, err = pgx.ForEachRow(rows, []any{&seq, &positions, &hashes, &prev, &digest}, func() error {
		cp := &persistence.AuditCheckpoint{Seq: seq, PrevDigest: prev, Digest: digest,
			Heads: make([]persistence.ChainHead, len(positions))}
		for i, p := range positions {
			cp.Heads[i] = persistence.ChainHead{Chain: i, TailPosition: p}
			if i < len(hashes) {
				cp.Heads[i].TailHash = hashes[i]
			}
		}
		out = append(out, cp)
		return nil
	})
	return out, storeErr("audit checkpoints", err)
}
