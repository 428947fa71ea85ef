package persistence_test

import (
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func chainEntry(id string) *auditv1.AuditEntry {
	return &auditv1.AuditEntry{EventId: id, EventType: "e", CreatedAt: timestamppb.Now()}
}

// Entries assigned chain on the tail in order; a restore to a mark
// unassigns exactly what came after it, and later entries chain on the
// mark as if the rolled-back ones had never been.
func TestChainTailAssignsAndRestores(t *testing.T) {
	var c persistence.ChainTail
	c.Start(41, "tailhash")
	a, b, x := chainEntry("a"), chainEntry("b"), chainEntry("x")
	c.Assign(a)
	m := c.Mark()
	c.Assign(x)
	if a.Position != 42 || a.PrevHash != "tailhash" || x.Position != 43 || x.PrevHash != a.Hash || c.Position() != 43 {
		t.Fatalf("assigned a=%d/%q x=%d/%q, tail %d", a.Position, a.PrevHash, x.Position, x.PrevHash, c.Position())
	}
	c.Restore(m)
	if x.Position != 0 || x.Hash != "" || x.PrevHash != "" || a.Position != 42 || c.Position() != 42 || c.Hash() != a.Hash {
		t.Fatalf("after restore: x=%d/%q a=%d tail %d", x.Position, x.Hash, a.Position, c.Position())
	}
	c.Assign(b)
	if b.Position != 43 || b.PrevHash != a.Hash || b.Hash != persistence.AuditHash(a.Hash, b) {
		t.Fatalf("b after a restore: %d %q", b.Position, b.PrevHash)
	}
	c.Restore(persistence.ChainMark{})
	if a.Position != 0 || b.Position != 0 {
		t.Fatal("the zero mark must unassign every entry")
	}
}

func TestPrepareEntryRefusesWhatCannotBeStored(t *testing.T) {
	committed := chainEntry("c")
	committed.Position = 3
	for name, e := range map[string]*auditv1.AuditEntry{
		"nil":        nil,
		"no id":      {EventType: "e", CreatedAt: timestamppb.Now()},
		"no type":    {EventId: "i", CreatedAt: timestamppb.Now()},
		"no time":    {EventId: "i", EventType: "e"},
		"committed":  committed,
		"far future": {EventId: "i", EventType: "e", CreatedAt: &timestamppb.Timestamp{Seconds: 1 << 40}},
	} {
		if err := persistence.PrepareEntry(e); errs.CodeOf(err) != errs.InvalidArgumentCode {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	e := chainEntry("ok")
	if err := persistence.PrepareEntry(e); err != nil || e.DetailsJson != "{}" {
		t.Fatalf("a good entry: %v, details %q", err, e.DetailsJson)
	}
}

// Within one transaction on several chains, each entry lands past the
// one assigned before it, whatever its chain; a restore brings the floor
// back too, so the next entry takes the place the rolled-back one had.
func TestChainTailKeepsATransactionInPositionOrder(t *testing.T) {
	var c persistence.ChainTail
	c.StartChains(map[int]persistence.ChainHead{1: {Chain: 1, TailPosition: 17}, 9: {Chain: 9, TailPosition: 25}}, 16, 30)
	a, x, b := chainEntry("a"), chainEntry("x"), chainEntry("b")
	c.AssignTo(9, a)
	m := c.Mark()
	c.AssignTo(9, x)
	if a.Position != 41 || x.Position != 57 {
		t.Fatalf("chain 9 from floor 30: %d, %d; want 41, 57", a.Position, x.Position)
	}
	c.Restore(m)
	c.AssignTo(1, b)
	if b.Position != 49 {
		t.Fatalf("chain 1 after 41 (x rolled back): %d, want 49", b.Position)
	}
}
