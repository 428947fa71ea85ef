package storetest

import (
	"slices"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func eventIDs(es []*auditv1.AuditEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.EventId)
	}
	return out
}

// reacquire releases the writer and takes it again, as a restarted audit
// actor would: the chain must continue from what is stored.
func (h *harness) reacquire() {
	h.Helper()
	h.w.Release()
	w, err := h.store.Writer()
	if err != nil {
		h.Fatalf("Writer after Release: %v", err)
	}
	h.w = w
}

var auditCases = []testCase{
	{"entries chain in commit order", func(h *harness) {
		var in []*auditv1.AuditEntry
		for i := 0; i < 3; i++ {
			batch := []*auditv1.AuditEntry{h.entry("a"), h.entry("b")}
			h.ok(&persistence.RecordAudit{Entries: batch})
			in = append(in, batch...)
		}
		h.inOrder(1, in...)
		if in[0].PrevHash != "" || !h.hashOK(in[0]) {
			h.Fatalf("first entry: prev %q hash %q", in[0].PrevHash, in[0].Hash)
		}
		stored := h.verifyChain()
		if len(stored) != len(in) {
			h.Fatalf("%d stored, want %d", len(stored), len(in))
		}
		for i := range in {
			if !proto.Equal(stored[i], in[i]) {
				h.Fatalf("stored entry %d:\n got %v\nwant %v", i, stored[i], in[i])
			}
		}
		got, err := h.r.GetAudit(h.ctx, in[3].EventId)
		if err != nil || !proto.Equal(got, in[3]) {
			h.Fatalf("GetAudit: %v, %v", got, err)
		}
		_, err = h.r.GetAudit(h.ctx, ids.New())
		wantCode(h.T, err, errs.NotFoundCode)
		if page, _ := h.r.ScanAudit(h.ctx, in[3].Position, 0); !slices.Equal(eventIDs(page), eventIDs(in[4:])) {
			h.Fatalf("ScanAudit after 4: %v", eventIDs(page))
		}
	}},
	{"chain continues after the writer is re-acquired", func(h *harness) {
		first := h.entry("a")
		h.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{first}})
		h.reacquire()
		e := h.entry("b")
		h.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{e}})
		h.inOrder(1, first, e)
		h.verifyChain()
	}},
	{"duplicate event id is ALREADY_EXISTS", func(h *harness) {
		e := h.entry("a")
		h.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{e}})
		dup := proto.Clone(e).(*auditv1.AuditEntry)
		dup.Position, dup.Hash, dup.PrevHash = 0, "", ""
		h.fails(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{h.entry("b"), dup}}, errs.AlreadyExistsCode)
		if n := len(h.verifyChain()); n != 1 {
			h.Fatalf("%d entries, want 1", n)
		}
	}},
	{"entry without id, type or time is INVALID_ARGUMENT", func(h *harness) {
		for _, mod := range []func(*auditv1.AuditEntry){
			func(e *auditv1.AuditEntry) { e.EventId = "" },
			func(e *auditv1.AuditEntry) { e.EventType = "" },
			func(e *auditv1.AuditEntry) { e.CreatedAt = nil },
		} {
			h.fails(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{h.entry("x", mod)}}, errs.InvalidArgumentCode)
		}
	}},
	{"filters, count and paging", func(h *harness) {
		type spec struct{ typ, plan, session, actor string }
		specs := []spec{
			{"plan_applied", "p1", "", "ann"}, {"session_created", "", "s1", "bob"}, {"plan_applied", "p2", "s1", "ann"},
			{"auth_failure", "", "", ""}, {"plan_applied", "p1", "s2", "bob"}, {"session_created", "", "s2", "ann"},
			{"plan_applied", "p1", "s1", "cy"}, {"auth_success", "", "", "cy"},
		}
		var all []*auditv1.AuditEntry
		for _, sp := range specs {
			all = append(all, h.entry(sp.typ, func(e *auditv1.AuditEntry) {
				e.PlanId, e.SessionId, e.ActorName = sp.plan, sp.session, sp.actor
			}))
		}
		h.ok(&persistence.RecordAudit{Entries: all})
		pick := func(keep func(sp spec, i int) bool) []string {
			var out []string
			for i, sp := range specs {
				if keep(sp, i) {
					out = append(out, all[i].EventId)
				}
			}
			return out
		}
		cases := []struct {
			f    *auditv1.Filter
			want []string
		}{
			{nil, eventIDs(all)},
			{&auditv1.Filter{}, eventIDs(all)},
			{&auditv1.Filter{EventType: "plan_applied"}, pick(func(sp spec, _ int) bool { return sp.typ == "plan_applied" })},
			{&auditv1.Filter{PlanId: "p1"}, pick(func(sp spec, _ int) bool { return sp.plan == "p1" })},
			{&auditv1.Filter{SessionId: "s1"}, pick(func(sp spec, _ int) bool { return sp.session == "s1" })},
			{&auditv1.Filter{ActorName: "ann"}, pick(func(sp spec, _ int) bool { return sp.actor == "ann" })},
			{&auditv1.Filter{EventType: "plan_applied", ActorName: "bob"}, []string{all[4].EventId}},
			{&auditv1.Filter{Since: all[2].CreatedAt}, pick(func(_ spec, i int) bool { return i >= 2 })},
			{&auditv1.Filter{Until: all[2].CreatedAt}, pick(func(_ spec, i int) bool { return i < 2 })},
			{&auditv1.Filter{Since: all[2].CreatedAt, Until: all[5].CreatedAt, PlanId: "p1"}, []string{all[4].EventId}},
			{&auditv1.Filter{PlanId: "none"}, nil},
		}
		for _, c := range cases {
			got, err := h.r.ListAudit(h.ctx, c.f, "", 0)
			if err != nil {
				h.Fatalf("ListAudit(%v): %v", c.f, err)
			}
			if !slices.Equal(eventIDs(got), c.want) {
				h.Fatalf("ListAudit(%v) = %v, want %v", c.f, eventIDs(got), c.want)
			}
			n, err := h.r.CountAudit(h.ctx, c.f)
			if err != nil || n != int64(len(c.want)) {
				h.Fatalf("CountAudit(%v) = %d, %v; want %d", c.f, n, err, len(c.want))
			}
			// Paging one at a time with the cursor yields the same list.
			var paged []string
			after := ""
			for {
				page, err := h.r.ListAudit(h.ctx, c.f, after, 1)
				if err != nil {
					h.Fatalf("ListAudit page after %q: %v", after, err)
				}
				if len(page) == 0 {
					break
				}
				paged = append(paged, page[0].EventId)
				after = page[0].EventId
			}
			if !slices.Equal(paged, c.want) {
				h.Fatalf("paged ListAudit(%v) = %v, want %v", c.f, paged, c.want)
			}
		}
		// A cursor that is not the filter's own entry still works: it
		// marks a place in commit order.
		got, err := h.r.ListAudit(h.ctx, &auditv1.Filter{PlanId: "p1"}, all[1].EventId, 0)
		if err != nil || !slices.Equal(eventIDs(got), []string{all[4].EventId, all[6].EventId}) {
			h.Fatalf("ListAudit after a foreign cursor: %v, %v", eventIDs(got), err)
		}
		_, err = h.r.ListAudit(h.ctx, nil, ids.New(), 0)
		wantCode(h.T, err, errs.NotFoundCode)
		if page, err := h.r.ListAudit(h.ctx, nil, all[len(all)-1].EventId, 0); err != nil || len(page) != 0 {
			h.Fatalf("ListAudit after the last entry: %v, %v", page, err)
		}
	}},
	{"prune removes the oldest prefix and anchors the chain", func(h *harness) {
		anchor, err := h.r.AuditAnchor(h.ctx)
		if err != nil || anchor != "" {
			h.Fatalf("anchor before any prune: %q, %v", anchor, err)
		}
		var all []*auditv1.AuditEntry
		for i := 0; i < 10; i++ {
			all = append(all, h.entry("a"))
		}
		// Entry 6 is older than the cutoff but comes after a newer one in
		// commit order: only the prefix 0..4 may go.
		all[6].CreatedAt = all[0].CreatedAt
		h.ok(&persistence.RecordAudit{Entries: all})
		cutoff := all[5].CreatedAt.AsTime()
		chain2, chain4 := h.chainOf(all[2]), h.chainOf(all[4])

		cmd := &persistence.PruneAudit{OlderThan: cutoff, Limit: 3}
		if n := cmd.ResultOf(h.ok(cmd)).Removed; n != 3 {
			h.Fatalf("removed %d, want 3 (the limit)", n)
		}
		h.anchorIs(chain2, all[2])
		h.verifyChain()
		pruneEntry := h.entry("audit_pruned")
		cmd = &persistence.PruneAudit{OlderThan: cutoff, Limit: 100, Audit: []*auditv1.AuditEntry{pruneEntry}}
		if n := cmd.ResultOf(h.ok(cmd)).Removed; n != 2 {
			h.Fatalf("removed %d, want 2 (up to the first newer entry)", n)
		}
		h.anchorIs(chain4, all[4])
		left := h.verifyChain()
		want := append(eventIDs(all[5:]), pruneEntry.EventId)
		if !slices.Equal(eventIDs(left), want) {
			h.Fatalf("left %v, want %v", eventIDs(left), want)
		}
		h.follows(all[9], pruneEntry)
		_, err = h.r.ListAudit(h.ctx, nil, all[0].EventId, 0)
		wantCode(h.T, err, errs.NotFoundCode)
		if cmd := (&persistence.PruneAudit{OlderThan: cutoff, Limit: 100}); cmd.ResultOf(h.ok(cmd)).Removed != 0 {
			h.Fatalf("second prune removed some")
		}
	}},
	{"positions continue after everything is pruned", func(h *harness) {
		es := []*auditv1.AuditEntry{h.entry("a"), h.entry("b")}
		h.ok(&persistence.RecordAudit{Entries: es})
		cmd := &persistence.PruneAudit{OlderThan: h.now().Add(time.Hour), Limit: 10}
		if n := cmd.ResultOf(h.ok(cmd)).Removed; n != 2 || len(h.scan()) != 0 {
			h.Fatalf("removed %d", n)
		}
		h.reacquire()
		e := h.entry("c")
		h.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{e}})
		h.follows(es[1], e)
		h.verifyChain()
	}},
	{"bad prune is INVALID_ARGUMENT", func(h *harness) {
		h.fails(&persistence.PruneAudit{OlderThan: h.now(), Limit: 0}, errs.InvalidArgumentCode)
	}},
	{"time filter bounds are exact to the nanosecond", func(h *harness) {
		e := h.entry("a", func(e *auditv1.AuditEntry) {
			e.CreatedAt = timestamppb.New(time.Date(2031, 1, 1, 0, 0, 0, 1, time.UTC))
		})
		h.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{e}})
		at := e.CreatedAt.AsTime()
		for _, c := range []struct {
			f    *auditv1.Filter
			want int64
		}{
			{&auditv1.Filter{Since: timestamppb.New(at)}, 1},
			{&auditv1.Filter{Since: timestamppb.New(at.Add(1))}, 0},
			{&auditv1.Filter{Until: timestamppb.New(at)}, 0},
			{&auditv1.Filter{Until: timestamppb.New(at.Add(1))}, 1},
		} {
			if n, err := h.r.CountAudit(h.ctx, c.f); err != nil || n != c.want {
				h.Fatalf("CountAudit(%v) = %d, %v; want %d", c.f, n, err, c.want)
			}
		}
	}},
}
