package postgres

import (
	"context"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/storetest"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The migration that adds principal and namespace keeps a trail written by
// an older build verifiable: its entries keep their hashes (no principal:
// the nine-field form), get their session's namespace (else the default
// one), and a new entry chains onto the old tail with both hashed.
func TestMigrationKeepsAnOldAuditChainVerifiable(t *testing.T) {
	// The schema an older build left: every migration before the one
	// that adds the principal.
	dsn, conn := olderSchema(t, migrationWith(t, "ADD COLUMN principal"))
	ctx := context.Background()
	session := ids.New()
	if _, err := conn.Exec(ctx, `INSERT INTO sessions (session_id, actor_name, namespace, automation, metadata_json, state, created_at, updated_at)
		VALUES ($1, 'a', 'team-a', '', '{}', 1, 1, 1)`, session); err != nil {
		t.Fatal(err)
	}
	old := storetest.OldAuditChain(session)
	for _, e := range old {
		if _, err := conn.Exec(ctx, `INSERT INTO audit_log (position, event_id, event_type, plan_id, session_id, project_name,
			actor_name, user_identity, details_json, created_at, prev_hash, hash) VALUES ($1, $2, $3, '', $4, '', $5, '', $6, $7, $8, $9)`,
			e.Position, e.EventId, e.EventType, e.SessionId, e.ActorName, e.DetailsJson, e.CreatedAt.AsTime().UnixNano(), e.PrevHash, e.Hash); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `UPDATE audit_chain SET tail_position = 2, tail_hash = $1`, old[1].Hash); err != nil {
		t.Fatal(err)
	}

	// One chain first (audit_chains=1), so the new entry lands on the
	// migrated chain; the partitioning below is what the default does at
	// open.
	s := mustOpen(t, withParam(dsn, "audit_chains", "1"))
	storetest.CheckMigratedAuditChain(t, s, old)
	got, err := s.Reader().ScanAudit(ctx, 0, 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("%d entries after the migration (%v), want 3", len(got), err)
	}
	// The chains migration made that trail chain 0 in place: its head is
	// the old tail advanced by the new entry, and after partitioning a new
	// chain's entries start past it while chain 0 still verifies.
	cr := s.Reader().(persistence.ChainReader)
	heads, err := cr.AuditChainHeads(ctx)
	if err != nil || len(heads) != 1 || heads[0].TailHash != got[2].Hash || heads[0].TailPosition != 3 {
		t.Fatalf("chain heads after the migration: %+v (%v), want chain 0 at 3, %s", heads, err, got[2].Hash)
	}
	if err := s.PartitionAudit(ctx, persistence.MaxAuditChains); err != nil {
		t.Fatal(err)
	}
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	var later []*auditv1.AuditEntry
	for i := range 8 {
		later = append(later, &auditv1.AuditEntry{EventId: ids.New(), EventType: "config_changed", SessionId: "s" + string(rune('a'+i)),
			CreatedAt: timestamppb.Now()})
	}
	res, err := w.Apply(ctx, []persistence.Command{&persistence.RecordAudit{Entries: later}})
	w.Release()
	if err != nil || res[0].Err != nil {
		t.Fatalf("record after partitioning: %v / %v", err, res[0].Err)
	}
	if heads, err = cr.AuditChainHeads(ctx); err != nil || len(heads) != persistence.MaxAuditChains {
		t.Fatalf("%d heads after partitioning (%v)", len(heads), err)
	}
	for _, h := range heads {
		es, err := cr.ScanAuditChain(ctx, h.Chain, 0, h.TailPosition, 100)
		if err != nil {
			t.Fatal(err)
		}
		link := h.AnchorHash
		for _, e := range es {
			if e.Position <= 3 && h.Chain != 0 || e.PrevHash != link || persistence.AuditChainHash(link, h.Chain, e) != e.Hash {
				t.Fatalf("chain %d does not verify at %d: %v", h.Chain, e.Position, e)
			}
			link = e.Hash
		}
		if link != h.TailHash {
			t.Fatalf("chain %d ends at %s, its head is %s", h.Chain, link, h.TailHash)
		}
	}
}
