package storetest

import (
	"slices"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var sessionCases = []testCase{
	{"create and get", func(h *harness) {
		s := h.session(func(s *sessionv1.Session) {
			s.Automation = "nightly"
			s.MetadataJson = `{"a":1}`
			s.TokenUsage = &sessionv1.TokenUsage{InputTokens: 3, OutputTokens: 4, Cost: 0.5}
			s.LinkedPlans = []*sessionv1.LinkedPlan{{PlanId: "p2", Phase: "execute", State: "running"}, {PlanId: "p1"}}
		})
		ms := h.msgs(3)
		h.ok(&persistence.CreateSession{Session: s, Messages: ms})
		got := h.get(s.SessionId)
		want := proto.Clone(s).(*sessionv1.Session)
		want.MessageCount = 3
		if !proto.Equal(got, want) {
			h.Fatalf("GetSession:\n got %v\nwant %v", got, want)
		}
		stored := h.messages(s.SessionId)
		if len(stored) != 3 {
			h.Fatalf("%d messages stored, want 3", len(stored))
		}
		for i, m := range stored {
			want := proto.Clone(ms[i]).(*sessionv1.Message)
			want.SessionId, want.Sequence = s.SessionId, int64(i)
			if !proto.Equal(m, want) {
				h.Fatalf("message %d:\n got %v\nwant %v", i, m, want)
			}
		}
	}},
	{"create defaults", func(h *harness) {
		s := h.session(func(s *sessionv1.Session) { s.MetadataJson = "" })
		h.ok(&persistence.CreateSession{Session: s})
		got := h.get(s.SessionId)
		if got.MetadataJson != "{}" || got.MessageCount != 0 || got.TokenUsage == nil || got.ClosedAt != nil {
			h.Fatalf("defaults: %v", got)
		}
	}},
	{"create existing id is ALREADY_EXISTS and changes nothing", func(h *harness) {
		s := h.create(h.msg("first"))
		again := proto.Clone(s).(*sessionv1.Session)
		again.ActorName = "other"
		h.fails(&persistence.CreateSession{Session: again, Messages: []*sessionv1.Message{h.msg("x")},
			Audit: []*auditv1.AuditEntry{h.entry("session_created")}}, errs.AlreadyExistsCode)
		if got := h.get(s.SessionId); got.ActorName != "actor" || got.MessageCount != 1 {
			h.Fatalf("existing session changed: %v", got)
		}
		if n := len(h.scan()); n != 0 {
			h.Fatalf("%d audit entries stored by a failed create", n)
		}
	}},
	{"get missing is NOT_FOUND", func(h *harness) {
		_, err := h.r.GetSession(h.ctx, ids.New())
		wantCode(h.T, err, errs.NotFoundCode)
	}},
	{"update accumulates token usage", func(h *harness) {
		s := h.create()
		for i := 0; i < 3; i++ {
			h.ok(&persistence.UpdateSession{SessionID: s.SessionId,
				TokenDelta: &sessionv1.TokenUsage{InputTokens: 10, OutputTokens: 5, Cost: 0.25}})
		}
		got := h.get(s.SessionId).TokenUsage
		if got.InputTokens != 30 || got.OutputTokens != 15 || got.Cost != 0.75 {
			h.Fatalf("token usage %v, want 30/15/0.75", got)
		}
	}},
	{"update state, closed_at, updated_at; zero fields left alone", func(h *harness) {
		s := h.create()
		closed, updated := h.now(), h.now()
		h.ok(&persistence.UpdateSession{SessionID: s.SessionId, State: sessionv1.SessionState_SESSION_STATE_CLOSED,
			ClosedAt: closed, UpdatedAt: updated})
		got := h.get(s.SessionId)
		if got.State != sessionv1.SessionState_SESSION_STATE_CLOSED || !got.ClosedAt.AsTime().Equal(closed) ||
			!got.UpdatedAt.AsTime().Equal(updated) {
			h.Fatalf("after update: %v", got)
		}
		h.ok(&persistence.UpdateSession{SessionID: s.SessionId})
		again := h.get(s.SessionId)
		if !proto.Equal(got, again) {
			h.Fatalf("empty update changed the session:\n got %v\nwant %v", again, got)
		}
		if !again.CreatedAt.AsTime().Equal(s.CreatedAt.AsTime()) {
			h.Fatalf("created_at changed")
		}
	}},
	{"link plan upserts and keeps order", func(h *harness) {
		s := h.create()
		for _, l := range []*sessionv1.LinkedPlan{
			{PlanId: "b", Phase: "action", State: "new"},
			{PlanId: "a", Phase: "action", State: "new"},
			{PlanId: "b", Phase: "apply", State: "done"},
		} {
			h.ok(&persistence.UpdateSession{SessionID: s.SessionId, LinkPlan: l})
		}
		got := h.get(s.SessionId).LinkedPlans
		want := []*sessionv1.LinkedPlan{{PlanId: "b", Phase: "apply", State: "done"}, {PlanId: "a", Phase: "action", State: "new"}}
		if !slices.EqualFunc(got, want, func(a, b *sessionv1.LinkedPlan) bool { return proto.Equal(a, b) }) {
			h.Fatalf("links %v, want %v", got, want)
		}
	}},
	{"update missing is NOT_FOUND", func(h *harness) {
		h.fails(&persistence.UpdateSession{SessionID: ids.New(), TokenDelta: &sessionv1.TokenUsage{InputTokens: 1},
			Audit: []*auditv1.AuditEntry{h.entry("x")}}, errs.NotFoundCode)
		if n := len(h.scan()); n != 0 {
			h.Fatalf("%d audit entries stored by a failed update", n)
		}
	}},
	{"delete cascades and reports orphaned plans", func(h *harness) {
		s := h.create(h.msgs(4)...)
		other := h.create(h.msgs(2)...)
		for _, p := range []string{"plan-z", "plan-a"} {
			h.ok(&persistence.UpdateSession{SessionID: s.SessionId, LinkPlan: &sessionv1.LinkedPlan{PlanId: p}})
			h.ok(&persistence.PlanWrite{PlanID: p})
		}
		del := &persistence.DeleteSession{SessionID: s.SessionId, Audit: []*auditv1.AuditEntry{h.entry("entity_deleted")}}
		res := del.ResultOf(h.ok(del))
		if res.MessagesRemoved != 4 || !slices.Equal(res.PlansOrphaned, []string{"plan-z", "plan-a"}) {
			h.Fatalf("delete result: removed %d, orphaned %v", res.MessagesRemoved, res.PlansOrphaned)
		}
		_, err := h.r.GetSession(h.ctx, s.SessionId)
		wantCode(h.T, err, errs.NotFoundCode)
		if ms := h.messages(s.SessionId); len(ms) != 0 {
			h.Fatalf("%d messages left after delete", len(ms))
		}
		for _, p := range []string{"plan-z", "plan-a"} {
			if _, err := h.r.GetPlan(h.ctx, "", p); err != nil {
				h.Fatalf("plan %s did not survive its session: %v", p, err)
			}
		}
		if got := h.get(other.SessionId); got.MessageCount != 2 {
			h.Fatalf("other session changed: %v", got)
		}
		if n := len(h.scan()); n != 1 {
			h.Fatalf("%d audit entries, want the delete's 1", n)
		}
		// The id is free again, with no leftovers.
		h.ok(&persistence.CreateSession{Session: h.session(func(n *sessionv1.Session) { n.SessionId = s.SessionId })})
		if got := h.get(s.SessionId); got.MessageCount != 0 || len(got.LinkedPlans) != 0 {
			h.Fatalf("recreated session has leftovers: %v", got)
		}
	}},
	{"delete without links", func(h *harness) {
		s := h.create()
		del := &persistence.DeleteSession{SessionID: s.SessionId}
		res := del.ResultOf(h.ok(del))
		if res.MessagesRemoved != 0 || len(res.PlansOrphaned) != 0 {
			h.Fatalf("delete result %+v", res)
		}
	}},
	{"delete missing is NOT_FOUND", func(h *harness) {
		h.fails(&persistence.DeleteSession{SessionID: ids.New()}, errs.NotFoundCode)
	}},
	{"list filters and pages in id order", func(h *harness) {
		var all []string
		for i := 0; i < 9; i++ {
			s := h.session(func(s *sessionv1.Session) {
				s.ActorName = []string{"ann", "bob", "cy"}[i%3]
				s.Namespace = []string{"ns1", "ns2"}[i%2]
				if i%4 == 0 {
					s.State = sessionv1.SessionState_SESSION_STATE_CLOSED
				}
			})
			h.ok(&persistence.CreateSession{Session: s})
			all = append(all, s.SessionId)
		}
		list := func(f persistence.SessionFilter) []string {
			h.Helper()
			got, err := h.r.ListSessions(h.ctx, f)
			if err != nil {
				h.Fatalf("ListSessions(%+v): %v", f, err)
			}
			var out []string
			for _, s := range got {
				out = append(out, s.SessionId)
			}
			return out
		}
		pick := func(keep func(i int) bool) []string {
			var out []string
			for i, id := range all {
				if keep(i) {
					out = append(out, id)
				}
			}
			return out
		}
		cases := []struct {
			f    persistence.SessionFilter
			want []string
		}{
			{persistence.SessionFilter{}, all},
			{persistence.SessionFilter{ActorName: "bob"}, pick(func(i int) bool { return i%3 == 1 })},
			{persistence.SessionFilter{Namespace: "ns2"}, pick(func(i int) bool { return i%2 == 1 })},
			{persistence.SessionFilter{State: sessionv1.SessionState_SESSION_STATE_CLOSED}, pick(func(i int) bool { return i%4 == 0 })},
			{persistence.SessionFilter{State: sessionv1.SessionState_SESSION_STATE_ACTIVE, Namespace: "ns1"},
				pick(func(i int) bool { return i%4 != 0 && i%2 == 0 })},
			{persistence.SessionFilter{ActorName: "nobody"}, nil},
			{persistence.SessionFilter{Limit: 4}, all[:4]},
			{persistence.SessionFilter{AfterID: all[3], Limit: 2}, all[4:6]},
			{persistence.SessionFilter{AfterID: all[8]}, nil},
		}
		for _, c := range cases {
			if got := list(c.f); !slices.Equal(got, c.want) {
				h.Fatalf("ListSessions(%+v) = %v, want %v", c.f, got, c.want)
			}
		}
		// Paging through everything visits each session once.
		var paged []string
		after := ""
		for {
			page := list(persistence.SessionFilter{AfterID: after, Limit: 2})
			if len(page) == 0 {
				break
			}
			paged = append(paged, page...)
			after = page[len(page)-1]
		}
		if !slices.Equal(paged, all) {
			h.Fatalf("paged %v, want %v", paged, all)
		}
	}},
	{"list returns full sessions", func(h *harness) {
		s := h.create(h.msgs(2)...)
		h.ok(&persistence.UpdateSession{SessionID: s.SessionId, LinkPlan: &sessionv1.LinkedPlan{PlanId: "p"},
			TokenDelta: &sessionv1.TokenUsage{InputTokens: 1}})
		bare := h.create()
		got, err := h.r.ListSessions(h.ctx, persistence.SessionFilter{})
		if err != nil || len(got) != 2 {
			h.Fatalf("ListSessions: %v, %d sessions", err, len(got))
		}
		for i, id := range []string{s.SessionId, bare.SessionId} {
			if want := h.get(id); !proto.Equal(got[i], want) {
				h.Fatalf("listed session differs from GetSession:\n got %v\nwant %v", got[i], want)
			}
		}
	}},
	{"import keeps timestamps exactly", func(h *harness) {
		m := h.msg("x")
		m.CreatedAt = timestamppb.New(time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC))
		s := h.create(m)
		if got := h.messages(s.SessionId)[0].CreatedAt; !proto.Equal(got, m.CreatedAt) {
			h.Fatalf("created_at %v, want %v", got, m.CreatedAt)
		}
	}},
}
