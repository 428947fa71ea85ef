package storetest

import (
	"slices"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
)

// feedCases are the reads the live feeds (actors/feed) are built on.
var feedCases = []testCase{
	{"bounds of an empty trail are zero", func(h *harness) {
		if a, hd, err := h.r.AuditBounds(h.ctx); err != nil || a != 0 || hd != 0 {
			h.Fatalf("AuditBounds = %d, %d, %v; want 0, 0", a, hd, err)
		}
	}},
	{"feed reads a position range with filters", func(h *harness) {
		s := h.create()
		var all []*auditv1.AuditEntry
		for i := 0; i < 12; i++ {
			e := h.entry([]string{"a", "b", "c"}[i%3])
			if i%2 == 0 {
				e.SessionId = s.SessionId
			}
			if i%4 == 0 {
				e.PlanId, e.ActorName = "plan-1", "bot"
			}
			all = append(all, e)
		}
		h.ok(&persistence.RecordAudit{Entries: all[:7]})
		h.ok(&persistence.RecordAudit{Entries: all[7:]})
		anchor, head, err := h.r.AuditBounds(h.ctx)
		if err != nil || anchor != 0 || head != all[11].Position {
			h.Fatalf("AuditBounds = %d, %d, %v; want 0, %d", anchor, head, err, all[11].Position)
		}
		h.inOrder(1, all...)
		at := func(i int) int64 { return all[i].Position }
		pick := func(keep func(i int, e *auditv1.AuditEntry) bool) []string {
			var out []string
			for i, e := range all {
				if keep(i, e) {
					out = append(out, e.EventId)
				}
			}
			return out
		}
		for _, c := range []struct {
			name        string
			f           *persistence.FeedFilter
			after, upto int64
			limit       int
			want        []string
		}{
			{"all", nil, 0, head, 0, pick(func(int, *auditv1.AuditEntry) bool { return true })},
			{"range", nil, at(2), at(8), 0, pick(func(i int, _ *auditv1.AuditEntry) bool { return i >= 3 && i < 9 })},
			{"limit", nil, at(1), head, 4, pick(func(i int, _ *auditv1.AuditEntry) bool { return i >= 2 && i < 6 })},
			{"types", &persistence.FeedFilter{EventTypes: []string{"a", "c"}}, 0, head, 0,
				pick(func(i int, _ *auditv1.AuditEntry) bool { return i%3 != 1 })},
			{"session", &persistence.FeedFilter{SessionID: s.SessionId}, 0, head, 0,
				pick(func(i int, _ *auditv1.AuditEntry) bool { return i%2 == 0 })},
			{"plan and actor", &persistence.FeedFilter{PlanID: "plan-1", ActorName: "bot"}, 0, head, 0,
				pick(func(i int, _ *auditv1.AuditEntry) bool { return i%4 == 0 })},
			{"everything", &persistence.FeedFilter{EventTypes: []string{"b"}, SessionID: s.SessionId, PlanID: "plan-1"}, 0, head, 0,
				pick(func(i int, _ *auditv1.AuditEntry) bool { return i%4 == 0 && i%3 == 1 })},
			{"empty range", nil, at(4), at(4), 0, nil},
		} {
			got, err := h.r.FeedAudit(h.ctx, c.f, c.after, c.upto, c.limit)
			if err != nil {
				h.Fatalf("%s: %v", c.name, err)
			}
			if !slices.Equal(eventIDs(got), c.want) {
				h.Fatalf("%s: got %v, want %v", c.name, eventIDs(got), c.want)
			}
			for _, e := range got {
				if !c.f.Matches(e) {
					h.Fatalf("%s: Matches disagrees with the store on %v", c.name, e)
				}
			}
		}
	}},
	{"bounds after a prune", func(h *harness) {
		es := []*auditv1.AuditEntry{h.entry("a"), h.entry("b"), h.entry("c")}
		h.ok(&persistence.RecordAudit{Entries: es})
		h.inOrder(1, es...)
		h.ok(&persistence.PruneAudit{OlderThan: es[2].CreatedAt.AsTime(), Limit: 10})
		p1, p2 := es[1].Position, es[2].Position
		if a, hd, err := h.r.AuditBounds(h.ctx); err != nil || a != p1 || hd != p2 {
			h.Fatalf("AuditBounds = %d, %d, %v; want %d, %d", a, hd, err, p1, p2)
		}
		h.ok(&persistence.PruneAudit{OlderThan: h.now().Add(time.Hour), Limit: 10})
		if a, hd, err := h.r.AuditBounds(h.ctx); err != nil || a != p2 || hd != p2 {
			h.Fatalf("after pruning everything: AuditBounds = %d, %d, %v; want %d, %d", a, hd, err, p2, p2)
		}
		got, err := h.r.FeedAudit(h.ctx, nil, 0, p2, 0)
		if err != nil || len(got) != 0 {
			h.Fatalf("FeedAudit after prune-all = %v, %v", eventIDs(got), err)
		}
	}},
}
