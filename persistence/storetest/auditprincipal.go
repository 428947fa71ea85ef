package storetest

import (
	"slices"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/agentstate/agentstate/persistence"
)

// auditPrincipalCases: who caused an entry and where it belongs are stored
// with it, hashed, defaulted when a command leaves them unset, and
// selected by the list, count and feed filters (the namespace filter on
// both sides of the index: the default namespace and another).
var auditPrincipalCases = []testCase{
	{"principal and namespace are stored, hashed and filtered", func(h *harness) {
		as := func(who, ns string) func(*auditv1.AuditEntry) {
			return func(e *auditv1.AuditEntry) { e.Principal, e.Namespace = who, ns }
		}
		es := []*auditv1.AuditEntry{
			h.entry("a", as("alice", "team-a")), h.entry("a", as("bob", "team-b")),
			h.entry("b", as("alice", persistence.DefaultNamespace)), h.entry("b"),
		}
		h.ok(&persistence.RecordAudit{Entries: es})
		if es[3].Principal != principal.Embedded || es[3].Namespace != persistence.DefaultNamespace {
			h.Fatalf("an entry without them got principal %q namespace %q", es[3].Principal, es[3].Namespace)
		}
		stored, err := h.r.ScanAudit(h.ctx, 0, 10)
		if err != nil {
			h.Fatal(err)
		}
		for i, e := range stored {
			if e.Principal != es[i].Principal || e.Namespace != es[i].Namespace || !h.hashOK(e) {
				h.Fatalf("stored entry %d: %v, want principal %q namespace %q and its hash", i, e, es[i].Principal, es[i].Namespace)
			}
		}
		for _, c := range []struct {
			f    *auditv1.Filter
			want []*auditv1.AuditEntry
		}{
			{&auditv1.Filter{Principal: "alice"}, []*auditv1.AuditEntry{es[0], es[2]}},
			{&auditv1.Filter{Namespace: "team-b"}, []*auditv1.AuditEntry{es[1]}},
			{&auditv1.Filter{Namespace: persistence.DefaultNamespace}, []*auditv1.AuditEntry{es[2], es[3]}},
			{&auditv1.Filter{Principal: "alice", Namespace: persistence.DefaultNamespace}, []*auditv1.AuditEntry{es[2]}},
			{&auditv1.Filter{Principal: "nobody"}, nil},
		} {
			got, err := h.r.ListAudit(h.ctx, c.f, "", 10)
			if err != nil || !slices.Equal(eventIDs(got), eventIDs(c.want)) {
				h.Fatalf("list %v: %v %v, want %v", c.f, eventIDs(got), err, eventIDs(c.want))
			}
			if n, err := h.r.CountAudit(h.ctx, c.f); err != nil || n != int64(len(c.want)) {
				h.Fatalf("count %v: %d %v, want %d", c.f, n, err, len(c.want))
			}
			ff := &persistence.FeedFilter{Principal: c.f.Principal, Namespace: c.f.Namespace}
			fed, err := h.r.FeedAudit(h.ctx, ff, 0, es[3].Position, 10)
			if err != nil || !slices.Equal(eventIDs(fed), eventIDs(c.want)) {
				h.Fatalf("feed %v: %v %v, want %v", ff, eventIDs(fed), err, eventIDs(c.want))
			}
			for _, e := range stored {
				if ff.Matches(e) != slices.Contains(eventIDs(c.want), e.EventId) {
					h.Fatalf("FeedFilter.Matches(%v) on %s disagrees with the store", ff, e.EventId)
				}
			}
		}
	}},
}
