package persistence_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// AuditHash is the chain's format: stored chains are verified with it, so
// it must stay exactly the SHA-256 of prev followed by the nine fields as
// netstrings. The reference here is written out with fmt, independently of
// the implementation's buffers, for entries small and large (larger than
// the implementation's stack buffer), with and without created_at, and
// with multi-byte text (lengths are bytes).
func TestAuditHashIsTheDocumentedFormat(t *testing.T) {
	at := time.Date(2026, 11, 26, 13, 4, 5, 120000000, time.FixedZone("x", 3600))
	entries := []*auditv1.AuditEntry{
		{EventId: "01J0000000000000000000000E", EventType: "plan_error_recorded", PlanId: "plan-1",
			ActorName: "executor", DetailsJson: `{"a":1}`, CreatedAt: timestamppb.New(at)},
		{EventId: "e2", EventType: "t", SessionId: "s", ProjectName: "p", UserIdentity: "ü",
			DetailsJson: "{}"},
		{EventId: "e3", EventType: "t", DetailsJson: `{"x":"` + strings.Repeat("é", 2000) + `"}`,
			CreatedAt: timestamppb.New(at.Add(time.Nanosecond))},
	}
	ref := func(prev string, e *auditv1.AuditEntry) string {
		created := ""
		if e.CreatedAt != nil {
			created = e.CreatedAt.AsTime().UTC().Format(time.RFC3339Nano)
		}
		var b strings.Builder
		b.WriteString(prev)
		for _, f := range []string{e.EventId, e.EventType, e.PlanId, e.SessionId, e.ProjectName,
			e.ActorName, e.UserIdentity, e.DetailsJson, created} {
			fmt.Fprintf(&b, "%d:%s,", len(f), f)
		}
		sum := sha256.Sum256([]byte(b.String()))
		return hex.EncodeToString(sum[:])
	}
	prev := ""
	for i, e := range entries {
		got, want := persistence.AuditHash(prev, e), ref(prev, e)
		if got != want {
			t.Fatalf("entry %d: AuditHash %s, want %s", i, got, want)
		}
		if sum := sha256.Sum256(persistence.AuditCanonical(e)); hex.EncodeToString(sum[:]) != ref("", e) {
			t.Fatalf("entry %d: AuditCanonical is not the documented form", i)
		}
		prev = got
	}
	// Fixed vectors (computed by the implementation before it was made
	// allocation-free), so that a change of format shows even if the
	// reference above were changed along with it.
	for prev, want := range map[string]string{
		"":    "7345e57d95645aacfdbad3d7370426fa64c1da0a5b935cf5aa8d6d581f6208c1",
		"abc": "18ad6b740959926d894bb17104446114aeeb95e1a58f98748e72bae18cb92e92",
	} {
		if got := persistence.AuditHash(prev, entries[0]); got != want {
			t.Fatalf("AuditHash(%q, entries[0]) = %s, want %s", prev, got, want)
		}
	}
}

// BenchmarkAuditHash: the writer hashes every entry it commits.
func BenchmarkAuditHash(b *testing.B) {
	e := &auditv1.AuditEntry{EventId: "01J0000000000000000000000E", EventType: "resource_modified", PlanId: "plan-1",
		ActorName: "bench", DetailsJson: `{"resource":"file:///src/main.go","modification":"edit","tool":"write_file"}`,
		CreatedAt: timestamppb.Now()}
	prev := persistence.AuditHash("", e)
	b.ReportAllocs()
	for b.Loop() {
		prev = persistence.AuditHash(prev, e)
	}
}
