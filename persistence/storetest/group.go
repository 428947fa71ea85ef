package storetest

import (
	"fmt"
	"slices"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// Deleting a group of sessions by client-key prefix (issue 30).

func (h *harness) sessionKeyed(ns, key string, msgs ...*sessionv1.Message) *sessionv1.Session {
	h.Helper()
	s := h.session(func(s *sessionv1.Session) { s.Namespace, s.ClientKey = ns, key })
	h.ok(&persistence.CreateSession{Session: s, Messages: msgs})
	return s
}

func (h *harness) deleteGroup(ns, prefix string) *persistence.DeleteSessions {
	return &persistence.DeleteSessions{Namespace: ns, ClientKeyPrefix: prefix,
		Entry: func(m persistence.GroupMember) (*auditv1.AuditEntry, error) {
			return h.entry("session_deleted", func(e *auditv1.AuditEntry) {
				e.SessionId, e.ActorName, e.DetailsJson = m.SessionID, m.ActorName, fmt.Sprintf(`{"messages":%d}`, m.Messages)
			}), nil
		}}
}

var groupCases = []testCase{
	{"a group delete removes every session with the prefix in the namespace, atomically and audited", func(h *harness) {
		a := h.sessionKeyed("t", "thread-1/a", h.msgs(3)...)
		b := h.sessionKeyed("t", "thread-1/b")
		c := h.sessionKeyed("t", "thread-10")
		other := h.sessionKeyed("u", "thread-1/a", h.msgs(1)...)
		plain := h.create()
		// The owner of a is fenced by the delete.
		epoch := h.activate(persistence.OwnerSession, a.SessionId, 1)
		before := h.countType("session_deleted")
		cmd := h.deleteGroup("t", "thread-1/")
		got := cmd.ResultOf(h.ok(cmd))
		want := []string{a.SessionId, b.SessionId}
		slices.Sort(want)
		if !slices.Equal(got.SessionIDs, want) || got.MessagesRemoved != 3 {
			h.Fatalf("deleted %v (%d messages), want %v (3)", got.SessionIDs, got.MessagesRemoved, want)
		}
		for _, id := range want {
			if _, err := h.r.GetSession(h.ctx, id); errs.CodeOf(err) != errs.NotFoundCode {
				h.Fatalf("session %s survived: %v", id, err)
			}
		}
		for _, s := range []*sessionv1.Session{c, other, plain} {
			h.get(s.SessionId)
		}
		if n := h.countType("session_deleted") - before; n != 2 {
			h.Fatalf("%d session_deleted entries, want 2", n)
		}
		h.verifyChain()
		fenced(h, h.apply(&persistence.AppendMessages{Epoch: epoch, SessionID: a.SessionId, NextSequence: 3,
			Turns: []persistence.Turn{turn(h.msg("late"))}})[0].Err)
		// None left: an empty group.
		if r := cmd.ResultOf(h.ok(h.deleteGroup("t", "thread-1/"))); len(r.SessionIDs) != 0 {
			h.Fatalf("second delete: %v", r.SessionIDs)
		}
		h.fails(h.deleteGroup("t", ""), errs.InvalidArgumentCode)
	}},
	{"a group larger than the bound is refused whole", func(h *harness) {
		for i := range persistence.MaxGroupSessions + 1 {
			h.sessionKeyed("big", fmt.Sprintf("k/%04d", i))
		}
		h.fails(h.deleteGroup("big", "k/"), errs.FailedPreconditionCode)
		for _, k := range []string{"k/0000", fmt.Sprintf("k/%04d", persistence.MaxGroupSessions)} {
			if _, err := h.r.FindSession(h.ctx, "big", k); err != nil {
				h.Fatalf("after a refused delete, %s: %v", k, err)
			}
		}
		if r := h.ok(h.deleteGroup("big", "k/00")); len((&persistence.DeleteSessions{}).ResultOf(r).SessionIDs) != 100 {
			h.Fatalf("a smaller group")
		}
	}},
}

// Shared scopes written without a session (issue 30).

func (h *harness) updateScopes(eventID string, retry bool, ds ...persistence.ScopeDelta) *persistence.UpdateScopes {
	e := h.entry("scopes_updated")
	if eventID != "" {
		e.EventId = eventID
	}
	return &persistence.UpdateScopes{Scopes: ds, UpdatedAt: h.now(), Audit: e, Retry: retry}
}

var scopeCases = []testCase{
	{"scope deltas apply in order in one audited command; a retried request is a duplicate", func(h *harness) {
		ds := append(scope("app:u", set("a", `1`)), append(scope("user:u/x", set("b", `2`)), scope("app:u", set("c", `3`))...)...)
		cmd := h.updateScopes("req-1", true, ds...)
		got := cmd.ResultOf(h.ok(cmd))
		if got.Duplicate || len(got.Scopes) != 2 || got.Scopes[0].Scope != "app:u" || got.Scopes[1].Scope != "user:u/x" {
			h.Fatalf("result %+v", got)
		}
		wantJSON(h, "app:u", h.scopeState("app:u"), `{"a":1,"c":3}`)
		wantJSON(h, "user:u/x", h.scopeState("user:u/x"), `{"b":2}`)
		entries := h.countType("scopes_updated")
		again := h.updateScopes("req-1", true, ds...)
		again.Audit.CreatedAt = cmd.Audit.CreatedAt
		if r := again.ResultOf(h.ok(again)); !r.Duplicate {
			h.Fatalf("retry: %+v", r)
		}
		wantJSON(h, "app:u after the retry", h.scopeState("app:u"), `{"a":1,"c":3}`)
		if h.countType("scopes_updated") != entries {
			h.Fatalf("a retry wrote an entry")
		}
		other := h.updateScopes("req-1", true, scope("app:u", set("a", `9`))...)
		other.Audit.DetailsJson = `{"other":true}`
		h.fails(other, errs.AlreadyExistsCode)
		// A retry in the same transaction as its original.
		one, two := h.updateScopes("req-2", true, scope("app:v", set("n", `1`))...), h.updateScopes("req-2", true, scope("app:v", set("n", `1`))...)
		res := h.apply(one, two)
		if res[0].Err != nil || res[1].Err != nil || !two.ResultOf(res[1]).Duplicate {
			h.Fatalf("same batch: %v %v %+v", res[0].Err, res[1].Err, two.ResultOf(res[1]))
		}
		h.verifyChain()
	}},
	// Past MaxStateKeys a shared scope is its namespace's quota error, as
	// for a session's scope deltas (scopequota.go).
	{"a scope update past its namespace's key quota stores nothing", func(h *harness) {
		h.ok(h.updateScopes("", false, scope("app:w", set("k", `1`))...))
		big := map[string]string{}
		for i := range persistence.MaxStateKeys + 1 {
			big[fmt.Sprint("k", i)] = `1`
		}
		ds := append(scope("app:w2", set("x", `1`)), persistence.ScopeDelta{Scope: "app:w", Delta: &sessionv1.StateDelta{SetJson: big}})
		h.fails(h.updateScopes("", false, ds...), errs.FailedPreconditionCode)
		wantJSON(h, "app:w2", h.scopeState("app:w2"), `{}`)
		h.fails(h.updateScopes("", false), errs.InvalidArgumentCode)
	}},
}
