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

func (h *harness) keyed(ns, key string, msgs ...*sessionv1.Message) *sessionv1.Session {
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
		a := h.keyed("t", "thread-1/a", h.msgs(3)...)
		b := h.keyed("t", "thread-1/b")
		c := h.keyed("t", "thread-10")
		other := h.keyed("u", "thread-1/a", h.msgs(1)...)
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
			h.keyed("big", fmt.Sprintf("k/%04d", i))
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
