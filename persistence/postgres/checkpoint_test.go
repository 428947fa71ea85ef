package postgres

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
)

func latestCheckpoint(t *testing.T, s *Store) ([]persistence.ChainHead, *persistence.AuditCheckpoint) {
	t.Helper()
	heads, cp, err := s.Reader().(persistence.CheckpointReader).AuditHeadsAndCheckpoint(context.Background())
	if err != nil || cp == nil {
		t.Fatalf("latest checkpoint: %v, %v", cp, err)
	}
	return heads, cp
}

// A writer that holds chains writes a checkpoint every checkpointEvery
// transactions, naming every chain's committed head, with the digest
// persistence.CheckpointDigest computes; the checkpoints link.
func TestWriterCheckpoints(t *testing.T) {
	s := mustOpen(t, withParam(freshDSN(t), "audit_chains", "16"), Unshared())
	_, first := latestCheckpoint(t, s)
	if len(first.Heads) != persistence.MaxAuditChains {
		t.Fatalf("the partition's checkpoint names %d chains, want %d", len(first.Heads), persistence.MaxAuditChains)
	}
	for range checkpointEvery {
		a, b := twoChainKeys()
		apply(t, s, recordFor(a), recordFor(b))
	}
	heads, cp := latestCheckpoint(t, s)
	if cp.Seq <= first.Seq {
		t.Fatalf("after %d transactions the latest checkpoint is still %d", checkpointEvery, cp.Seq)
	}
	for i, h := range cp.Heads {
		if h.TailPosition != heads[i].TailPosition || h.TailHash != heads[i].TailHash {
			t.Fatalf("checkpoint %d names chain %d at %d %q; its head is at %d %q", cp.Seq, i, h.TailPosition, h.TailHash,
				heads[i].TailPosition, heads[i].TailHash)
		}
	}
	all, err := s.Reader().(persistence.CheckpointReader).AuditCheckpoints(context.Background(), 0, math.MaxInt64, 100)
	if err != nil {
		t.Fatal(err)
	}
	prev := ""
	for _, c := range all {
		if c.PrevDigest != prev || persistence.CheckpointDigest(c.Seq, c.Heads, c.PrevDigest) != c.Digest {
			t.Fatalf("checkpoint %d: prev %q digest %q; want prev %q and its digest", c.Seq, c.PrevDigest, c.Digest, prev)
		}
		prev = c.Digest
	}
}

// A writer never waits for the checkpoint lock: while another session
// holds it, due transactions commit without a checkpoint, and the first
// one due after it is released writes it.
func TestCheckpointLockIsNeverWaitedFor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := freshDSN(t)
	s := mustOpen(t, withParam(dsn, "audit_chains", "16"), Unshared())
	_, before := latestCheckpoint(t, s)
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, 0)`, checkpointLockClass); err != nil {
		t.Fatal(err)
	}
	for range 2 * checkpointEvery {
		w, err := s.Writer()
		if err != nil {
			t.Fatal(err)
		}
		res, err := w.Apply(ctx, []persistence.Command{recordFor("s")})
		w.Release()
		if err != nil || res[0].Err != nil {
			t.Fatalf("apply while the checkpoint lock is held: %v, %v", err, res[0].Err)
		}
	}
	if _, cp := latestCheckpoint(t, s); cp.Seq != before.Seq {
		t.Fatalf("checkpoint %d written while another session held the lock", cp.Seq)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	apply(t, s, recordFor("s"))
	heads, cp := latestCheckpoint(t, s)
	if cp.Seq != before.Seq+1 || cp.Heads[persistence.AuditChainOf("s", persistence.MaxAuditChains)] !=
		heads[persistence.AuditChainOf("s", persistence.MaxAuditChains)] {
		t.Fatalf("after the lock was released: checkpoint %d %+v, want %d naming %+v", cp.Seq, cp.Heads, before.Seq+1, heads)
	}
}
