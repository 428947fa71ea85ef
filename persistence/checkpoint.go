package persistence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// AuditCheckpoint commits to every chain of a partitioned trail at once,
// as a Certificate Transparency tree head commits to a log (without a
// signature): the number of chains, each chain's head (its last entry's
// position and hash, or, for a chain without entries yet, its starting
// position and ""), and a digest over them and over the previous
// checkpoint's digest, so the checkpoints form a chain of their own.
//
// The contract (what Verify relies on): a checkpoint names only committed
// heads; per chain, a later checkpoint's head is at or past an earlier
// one's, and its chain count is no smaller; and every chain's current head
// is at or past the latest checkpoint's. So a chain that lost its newest
// entries, all of them, or its head row, is behind a checkpoint or missing
// from the heads, and Verify names it.
type AuditCheckpoint struct {
	Seq int64
	// Heads are chains 0 to len(Heads)-1, in order (Chain, TailPosition
	// and TailHash set).
	Heads      []ChainHead
	PrevDigest string
	Digest     string
}

// CheckpointDigest is the digest of a checkpoint: the lowercase hex
// SHA-256 of
//
//	"agentstate audit checkpoint\n" seq "\n" prev "\n"
//
// followed, for each chain in order, by "chain position hash\n" (decimal
// numbers, single spaces). The PostgreSQL store computes the same bytes in
// SQL (checkpointSQL); the two must never diverge.
func CheckpointDigest(seq int64, heads []ChainHead, prev string) string {
	b := make([]byte, 0, 64+len(prev)+len(heads)*90)
	b = append(b, "agentstate audit checkpoint\n"...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, '\n')
	b = append(b, prev...)
	b = append(b, '\n')
	for _, h := range heads {
		b = strconv.AppendInt(b, int64(h.Chain), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, h.TailPosition, 10)
		b = append(b, ' ')
		b = append(b, h.TailHash...)
		b = append(b, '\n')
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// CheckpointReader is a ChainReader that keeps checkpoints (the PostgreSQL
// store). A store without it has no checkpoints: Verify then checks the
// chains against their heads only.
type CheckpointReader interface {
	// AuditHeadsAndCheckpoint reads every chain's head, in chain order,
	// and the latest checkpoint (nil when there is none) in one snapshot.
	AuditHeadsAndCheckpoint(ctx context.Context) ([]ChainHead, *AuditCheckpoint, error)
	// AuditCheckpoints returns the checkpoints with afterSeq < Seq <=
	// uptoSeq, in Seq order, at most limit.
	AuditCheckpoints(ctx context.Context, afterSeq, uptoSeq int64, limit int) ([]*AuditCheckpoint, error)
}
