package sqlstore

import (
	"context"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
)

// chainHeads is the Own part of a store whose trail is partitioned into
// chains (an audit_log.chain column and a head row per chain).
type chainHeads interface {
	AuditChainHeads(ctx context.Context) ([]persistence.ChainHead, error)
}

var _ persistence.ChainReader = (*Reader)(nil)

// AuditChainHeads is the store's own, or, for a trail of one chain, that
// chain's anchor and its last entry.
func (r *Reader) AuditChainHeads(ctx context.Context) ([]persistence.ChainHead, error) {
	if c, ok := r.Own.(chainHeads); ok {
		return c.AuditChainHeads(ctx)
	}
	anchor, err := r.AuditAnchor(ctx)
	if err != nil {
		return nil, err
	}
	h := persistence.ChainHead{AnchorHash: anchor, TailHash: anchor}
	err = r.DB.QueryRow(ctx, "SELECT position, hash FROM audit_log ORDER BY position DESC LIMIT 1", nil,
		[]any{&h.TailPosition, &h.TailHash})
	if err != nil && !r.DB.NoRows(err) {
		return nil, r.DB.Err("audit chain heads", err)
	}
	return []persistence.ChainHead{h}, nil
}

// ScanAuditChain reads one chain's entries in position order (a trail of
// one chain has only chain 0: all of them).
func (r *Reader) ScanAuditChain(ctx context.Context, chain int, after, upto int64, limit int) ([]*auditv1.AuditEntry, error) {
	w := NewWhere(r.DB)
	if _, ok := r.Own.(chainHeads); ok {
		w.Cond("chain = " + w.Arg(chain))
	} else if chain != 0 {
		return nil, nil
	}
	w.Cond("position > " + w.Arg(after))
	w.Cond("position <= " + w.Arg(upto))
	return r.audit(ctx, "SELECT "+AuditColumns+" FROM audit_log"+w.Clause()+
		" ORDER BY position LIMIT "+w.Arg(persistence.ClampLimit(limit)), w.Args()...)
}

var _ persistence.CheckpointReader = (*Reader)(nil)

// AuditHeadsAndCheckpoint is the store's own, or, for a store without
// checkpoints (one chain: SQLite), its heads and no checkpoint.
func (r *Reader) AuditHeadsAndCheckpoint(ctx context.Context) ([]persistence.ChainHead, *persistence.AuditCheckpoint, error) {
	if c, ok := r.Own.(persistence.CheckpointReader); ok {
		return c.AuditHeadsAndCheckpoint(ctx)
	}
	heads, err := r.AuditChainHeads(ctx)
	return heads, nil, err
}

// AuditCheckpoints is the store's own; a store without checkpoints has
// none.
func (r *Reader) AuditCheckpoints(ctx context.Context, after, upto int64, limit int) ([]*persistence.AuditCheckpoint, error) {
	if c, ok := r.Own.(persistence.CheckpointReader); ok {
		return c.AuditCheckpoints(ctx, after, upto, limit)
	}
	return nil, nil
}
