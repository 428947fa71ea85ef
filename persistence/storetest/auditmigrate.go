package storetest

import (
	"context"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The migration that adds principal and namespace to the audit trail is
// checked the same way on each store: the store's test writes
// OldAuditChain into a database at the schema before it (with the
// store's SQL), opens the store, and CheckMigratedAuditChain judges.

// OldAuditChain is a chain of two entries as a build before the
// principal wrote it (the nine-field hash form): the first of session,
// which lives in namespace "team-a", the second of none.
func OldAuditChain(session string) []*auditv1.AuditEntry {
	old := []*auditv1.AuditEntry{
		{EventId: ids.New(), EventType: "session_created", SessionId: session, ActorName: "a", DetailsJson: "{}", CreatedAt: timestamppb.Now()},
		{EventId: ids.New(), EventType: "config_changed", DetailsJson: "{}", CreatedAt: timestamppb.Now()},
	}
	prev := ""
	for i, e := range old {
		e.Position, e.PrevHash = int64(i+1), prev
		e.Hash = persistence.AuditHash(prev, e) // no principal: the form old builds wrote
		prev = e.Hash
	}
	return old
}

// CheckMigratedAuditChain records a new entry on s, opened on a database
// that held old (OldAuditChain), and checks the trail: the old entries
// keep their hashes and get their session's namespace (else the default
// one), the new one chains onto the old tail with its principal hashed,
// and a principal written into an old entry afterwards breaks its link.
func CheckMigratedAuditChain(t *testing.T, s persistence.Store, old []*auditv1.AuditEntry) {
	t.Helper()
	ctx := context.Background()
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	fresh := &auditv1.AuditEntry{EventId: ids.New(), EventType: "config_changed", Principal: "alice", CreatedAt: timestamppb.Now()}
	res, err := w.Apply(ctx, []persistence.Command{&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{fresh}}})
	w.Release()
	if err != nil || res[0].Err != nil {
		t.Fatalf("record after the migration: %v / %v", err, res[0].Err)
	}
	got, err := s.Reader().ScanAudit(ctx, 0, 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("%d entries after the migration (%v), want 3", len(got), err)
	}
	wantNS := []string{"team-a", persistence.DefaultNamespace, persistence.DefaultNamespace}
	wantPrincipal := []string{"", "", "alice"}
	link := ""
	for i, e := range got {
		if e.Namespace != wantNS[i] || e.Principal != wantPrincipal[i] {
			t.Errorf("entry %d: principal %q namespace %q, want %q %q", i, e.Principal, e.Namespace, wantPrincipal[i], wantNS[i])
		}
		if e.PrevHash != link || persistence.AuditHash(link, e) != e.Hash {
			t.Fatalf("entry %d does not verify after the migration: %v", i, e)
		}
		link = e.Hash
	}
	if got[0].Hash != old[0].Hash || got[1].Hash != old[1].Hash {
		t.Fatal("the migration changed an old entry's hash")
	}
	forged := got[0]
	forged.Principal = "mallory"
	if persistence.AuditHash("", forged) == old[0].Hash {
		t.Fatal("a principal added to an old entry keeps its hash")
	}
}
