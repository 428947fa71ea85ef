package audit_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/audit/audittest"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/postgres"
	"github.com/agentstate/agentstate/persistence/postgres/pgtest"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// oneChain is dsn with audit_chains=1: a trail of one chain, as before
// chains.
func oneChain(dsn string) string {
	if strings.Contains(dsn, "://") {
		return dsn + "&audit_chains=1"
	}
	return dsn + " audit_chains=1"
}

// A trail of one chain (from before chains, or kept by audit_chains=1) is
// partitioned in place when a member opens it with the default: its
// entries stay chain 0 with their hashes, Verify passes before and after,
// and the new entries of every member spread over the chains.
func TestDefaultPartitionsATrailInPlace(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Schema(t, "chains_")
	old, err := postgres.Open(ctx, oneChain(dsn), postgres.Unshared())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close() })
	before := audittest.Start(t, audittest.NewSystem(t), old, writer.Config{})
	var first []*auditv1.AuditEntry
	for i := range 20 {
		first = append(first, audittest.Record(t, before, &auditv1.RecordRequest{EventType: audit.EventResourceModified,
			Sync: true, SessionId: "old-" + strconv.Itoa(i)}))
	}
	audittest.MustVerify(t, before)

	st, err := postgres.Open(ctx, dsn, postgres.Unshared())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	heads, err := st.Reader().(persistence.ChainReader).AuditChainHeads(ctx)
	if err != nil || len(heads) != persistence.MaxAuditChains {
		t.Fatalf("%d heads after the default open (%v), want %d", len(heads), err, persistence.MaxAuditChains)
	}
	if heads[0].TailHash != first[len(first)-1].Hash {
		t.Fatalf("chain 0's head %s, want the old trail's last entry %s", heads[0].TailHash, first[len(first)-1].Hash)
	}
	after := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{})
	if v := audittest.MustVerify(t, after); v.EntriesChecked != 20 {
		t.Fatalf("checked %d entries after partitioning, want 20", v.EntriesChecked)
	}
	for i := range 40 {
		svc := before
		if i%2 == 1 {
			svc = after
		}
		audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventResourceModified, Sync: true,
			SessionId: "new-" + strconv.Itoa(i)})
	}
	if v := audittest.MustVerify(t, after); v.EntriesChecked != 60 {
		t.Fatalf("checked %d entries, want 60", v.EntriesChecked)
	}
	for _, e := range first {
		got, err := st.Reader().GetAudit(ctx, e.EventId)
		if err != nil || got.Hash != e.Hash || got.Position != e.Position {
			t.Fatalf("old entry %s after partitioning: %v, %v", e.EventId, got, err)
		}
	}
	used := map[int]bool{}
	cr := st.Reader().(persistence.ChainReader)
	for ch := range persistence.MaxAuditChains {
		if es, err := cr.ScanAuditChain(ctx, ch, 0, math.MaxInt64, 1); err == nil && len(es) > 0 {
			used[ch] = true
		}
	}
	// The old entries stay on chain 0; the new ones go on the writers'
	// own chains (the first each can lock without waiting), so the
	// partitioned trail is in use beside it.
	if !used[0] || len(used) < 2 {
		t.Fatalf("entries on chains %v after partitioning, want chain 0 and the writers' own", used)
	}
}

// A prune removes a prefix of the entries and of the checkpoints; the
// trail still verifies, against checkpoints whose heads were pruned (they
// are anchors now, or below them) and the ones left; and after a prune of
// everything too.
func TestVerifyAfterPruningAPartitionedTrail(t *testing.T) {
	ctx := context.Background()
	tr := openChainTrail(t)
	for range 3 {
		if err := tr.st.CheckpointAudit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var mid int64
	if err := tr.conn.QueryRow(ctx, `SELECT created_at FROM audit_log ORDER BY position OFFSET 80 LIMIT 1`).Scan(&mid); err != nil {
		t.Fatal(err)
	}
	for _, cutoff := range []time.Time{time.Unix(0, mid), time.Now().Add(time.Hour)} {
		if _, err := tr.svc.Prune(ctx, &auditv1.PruneRequest{OlderThan: timestamppb.New(cutoff)}); err != nil {
			t.Fatal(err)
		}
		audittest.MustVerify(t, tr.svc)
		var first, latest int64
		if err := tr.conn.QueryRow(ctx, `SELECT min(seq), max(seq) FROM audit_checkpoints`).Scan(&first, &latest); err != nil {
			t.Fatal(err)
		}
		if first == 1 {
			t.Fatalf("prune to %v kept every checkpoint (%d to %d)", cutoff, first, latest)
		}
		audittest.Record(t, tr.svc, &auditv1.RecordRequest{EventType: audit.EventResourceModified, Sync: true, SessionId: "after"})
		audittest.MustVerify(t, tr.svc)
	}
}
