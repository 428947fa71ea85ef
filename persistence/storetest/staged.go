package storetest

import (
	"errors"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// stagedCases: a session imported in pieces (persistence.SessionStateStaged)
// is written like any other but read by nobody until it is made active; a
// staged session is removed in bounded pieces.
var stagedCases = []testCase{
	{"a staged session is invisible until made active", func(h *harness) {
		visible := h.create(h.msg("other"))
		s := h.session(func(s *sessionv1.Session) { s.State = persistence.SessionStateStaged })
		epoch := h.activate(persistence.OwnerSession, s.SessionId, 1)
		h.ok(&persistence.CreateSession{Epoch: epoch, Session: s})
		for i := int64(0); i < 3; i++ {
			h.ok(&persistence.AppendMessages{Epoch: epoch, SessionID: s.SessionId, NextSequence: i * 2,
				Turns: []persistence.Turn{turn(h.msg("a")), turn(h.msg("b"))}, UpdatedAt: h.now()})
		}
		h.hidden(s.SessionId, visible.SessionId)
		staged, err := h.r.ListSessions(h.ctx, persistence.SessionFilter{State: persistence.SessionStateStaged})
		if err != nil || len(staged) != 1 || staged[0].SessionId != s.SessionId || staged[0].MessageCount != 6 {
			h.Fatalf("ListSessions(state staged): %v, %v; want the staged session with 6 messages", staged, err)
		}
		h.ok(&persistence.UpdateSession{Epoch: epoch, SessionID: s.SessionId,
			State: sessionv1.SessionState_SESSION_STATE_ACTIVE, UpdatedAt: h.now()})
		if got := h.get(s.SessionId); got.MessageCount != 6 || got.State != sessionv1.SessionState_SESSION_STATE_ACTIVE {
			h.Fatalf("after activation: %v", got)
		}
		if ms := h.messages(s.SessionId); len(ms) != 6 {
			h.Fatalf("after activation: %d messages, want 6", len(ms))
		}
		if all, err := h.r.ListSessions(h.ctx, persistence.SessionFilter{}); err != nil || len(all) != 2 {
			h.Fatalf("ListSessions after activation: %d, %v; want 2", len(all), err)
		}
	}},
	{"a staged session is deleted in bounded pieces", func(h *harness) {
		s := h.session(func(s *sessionv1.Session) {
			s.State = persistence.SessionStateStaged
			s.LinkedPlans = []*sessionv1.LinkedPlan{{PlanId: "p1"}}
		})
		h.ok(&persistence.CreateSession{Session: s, Messages: h.msgs(25)})
		var removed []int64
		for {
			del := &persistence.DeleteSession{SessionID: s.SessionId, Limit: 10}
			res := del.ResultOf(h.ok(del))
			removed = append(removed, res.MessagesRemoved)
			if res.MessagesRemoved < 10 {
				if len(res.PlansOrphaned) != 1 {
					h.Fatalf("last piece orphaned %v; want p1", res.PlansOrphaned)
				}
				break
			}
			if len(removed) > 5 {
				h.Fatalf("removals never end: %v", removed)
			}
			staged, err := h.r.ListSessions(h.ctx, persistence.SessionFilter{State: persistence.SessionStateStaged})
			if err != nil || len(staged) != 1 || staged[0].MessageCount != 25 {
				h.Fatalf("between pieces the session is still there: %v, %v", staged, err)
			}
		}
		if len(removed) != 3 || removed[0] != 10 || removed[1] != 10 || removed[2] != 5 {
			h.Fatalf("pieces removed %v; want [10 10 5]", removed)
		}
		staged, err := h.r.ListSessions(h.ctx, persistence.SessionFilter{State: persistence.SessionStateStaged})
		if err != nil || len(staged) != 0 {
			h.Fatalf("after the last piece: %v, %v", staged, err)
		}
		h.fails(&persistence.DeleteSession{SessionID: s.SessionId, Limit: 10}, errs.NotFoundCode)
	}},
}

// hidden asserts that no read shows session id, while the visible one
// still reads.
func (h *harness) hidden(id, visible string) {
	h.Helper()
	if _, err := h.r.GetSession(h.ctx, id); !errors.Is(err, errs.ErrNotFound) {
		h.Fatalf("GetSession of a staged session: %v; want NOT_FOUND", err)
	}
	if ms, err := h.r.ListMessages(h.ctx, id, 0, 0); err != nil || len(ms) != 0 {
		h.Fatalf("ListMessages of a staged session: %d, %v; want none", len(ms), err)
	}
	all, err := h.r.ListSessions(h.ctx, persistence.SessionFilter{})
	if err != nil || len(all) != 1 || all[0].SessionId != visible {
		h.Fatalf("ListSessions: %v, %v; want only %s", all, err, visible)
	}
	if ms, err := h.r.ListMessages(h.ctx, visible, 0, 0); err != nil || len(ms) != 1 {
		h.Fatalf("ListMessages of the visible session: %d, %v", len(ms), err)
	}
}
