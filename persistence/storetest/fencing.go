package storetest

import (
	"errors"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// activate takes a new epoch for (kind, id) and checks that it is want.
func (h *harness) activate(kind persistence.OwnerKind, id string, want int64) int64 {
	h.Helper()
	res := h.ok(&persistence.Activate{Kind: kind, ID: id})
	if res.Epoch != want {
		h.Fatalf("Activate(%d, %s): epoch %d, want %d", kind, id, res.Epoch, want)
	}
	return res.Epoch
}

// fenced checks that err is the fencing failure: errors.Is ErrFenced and
// FAILED_PRECONDITION.
func fenced(h *harness, err error) {
	h.Helper()
	if !errors.Is(err, persistence.ErrFenced) {
		h.Fatalf("got %v, want ErrFenced", err)
	}
	wantCode(h.T, err, errs.FailedPreconditionCode)
}

// audits counts the stored audit entries.
func (h *harness) audits() int {
	h.Helper()
	return len(h.scan())
}

// fencedOnly applies cmd, checks that it was fenced and that no audit entry
// was stored with it.
func (h *harness) fencedOnly(cmd persistence.Command) {
	h.Helper()
	before := h.audits()
	fenced(h, h.apply(cmd)[0].Err)
	if after := h.audits(); after != before {
		h.Fatalf("a fenced %T stored %d audit entries", cmd, after-before)
	}
}

// sessionAt creates a session through epoch 1 of its owner, with msgs.
func (h *harness) sessionAt(msgs ...*sessionv1.Message) *sessionv1.Session {
	h.Helper()
	s := h.session()
	h.activate(persistence.OwnerSession, s.SessionId, 1)
	h.ok(&persistence.CreateSession{Epoch: 1, Session: s, Messages: msgs})
	return s
}

var fencingCases = []testCase{
	{"activate increments per kind and id", func(h *harness) {
		for e := int64(1); e <= 3; e++ {
			h.activate(persistence.OwnerSession, "a", e)
		}
		// The same id under the other kind, and another id, start at 1.
		h.activate(persistence.OwnerPlan, "a", 1)
		h.activate(persistence.OwnerSession, "b", 1)
		h.activate(persistence.OwnerSession, "a", 4)
		h.activate(persistence.OwnerPlan, "a", 2)
	}},
	{"activate refuses an unknown kind or an empty id", func(h *harness) {
		h.fails(&persistence.Activate{Kind: 0, ID: "a"}, errs.InvalidArgumentCode)
		h.fails(&persistence.Activate{Kind: 99, ID: "a"}, errs.InvalidArgumentCode)
		h.fails(&persistence.Activate{Kind: persistence.OwnerPlan}, errs.InvalidArgumentCode)
		// Nothing was taken: the first real activation is epoch 1.
		h.activate(persistence.OwnerPlan, "a", 1)
	}},
	{"the current epoch writes every command", func(h *harness) {
		s := h.sessionAt(h.msgs(2)...)
		h.ok(&persistence.AppendMessages{Epoch: 1, SessionID: s.SessionId, NextSequence: 2, Turns: []persistence.Turn{turn(h.msg("x"))}})
		h.ok(&persistence.UpdateSession{Epoch: 1, SessionID: s.SessionId, TokenDelta: &sessionv1.TokenUsage{InputTokens: 5}})
		if got := h.get(s.SessionId); got.MessageCount != 3 || got.GetTokenUsage().GetInputTokens() != 5 {
			h.Fatalf("session after current-epoch writes: %v", got)
		}
		h.ok(&persistence.DeleteSession{Epoch: 1, SessionID: s.SessionId})
		h.activate(persistence.OwnerPlan, "p", 1)
		h.ok(&persistence.PlanWrite{Epoch: 1, PlanID: "p",
			Records: []*planv1.ErrorRecord{h.record("p", 0, planv1.Phase_PHASE_EXECUTE, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)}})
		if p := h.plan("p"); p.NextSequence != 1 {
			h.Fatalf("plan after a current-epoch write: %+v", p)
		}
	}},
	{"stale create is fenced and stores nothing", func(h *harness) {
		s := h.session()
		h.activate(persistence.OwnerSession, s.SessionId, 1)
		h.activate(persistence.OwnerSession, s.SessionId, 2)
		h.fencedOnly(&persistence.CreateSession{Epoch: 1, Session: s, Messages: h.msgs(2),
			Audit: h.entries("session_created", s.SessionId)})
		_, err := h.r.GetSession(h.ctx, s.SessionId)
		wantCode(h.T, err, errs.NotFoundCode)
		if ms := h.messages(s.SessionId); len(ms) != 0 {
			h.Fatalf("a fenced create stored %d messages", len(ms))
		}
		// The current owner creates it.
		h.ok(&persistence.CreateSession{Epoch: 2, Session: s})
	}},
	{"stale append is fenced and stores nothing", func(h *harness) {
		s := h.sessionAt(h.msgs(2)...)
		h.activate(persistence.OwnerSession, s.SessionId, 2)
		h.fencedOnly(&persistence.AppendMessages{Epoch: 1, SessionID: s.SessionId, NextSequence: 2, UpdatedAt: h.now(),
			Turns: []persistence.Turn{{Messages: h.msgs(2), Audit: h.entries("message_appended", s.SessionId)}}})
		if got := h.get(s.SessionId); got.MessageCount != 2 || !got.UpdatedAt.AsTime().Equal(s.UpdatedAt.AsTime()) {
			h.Fatalf("session after a fenced append: %v", got)
		}
		if ms := h.messages(s.SessionId); len(ms) != 2 {
			h.Fatalf("%d messages after a fenced append, want 2", len(ms))
		}
		// The new owner continues at the same sequence.
		res := h.appendOK(&persistence.AppendMessages{Epoch: 2, SessionID: s.SessionId, NextSequence: 2, Turns: []persistence.Turn{turn(h.msg("x"))}})
		if res.NextSequence != 3 {
			h.Fatalf("append by the new owner: next %d, want 3", res.NextSequence)
		}
	}},
	{"stale update is fenced and stores nothing", func(h *harness) {
		s := h.sessionAt()
		h.activate(persistence.OwnerSession, s.SessionId, 2)
		h.fencedOnly(&persistence.UpdateSession{Epoch: 1, SessionID: s.SessionId,
			State: sessionv1.SessionState_SESSION_STATE_CLOSED, ClosedAt: h.now(), UpdatedAt: h.now(),
			TokenDelta: &sessionv1.TokenUsage{InputTokens: 10, OutputTokens: 20, Cost: 0.5},
			LinkPlan:   &sessionv1.LinkedPlan{PlanId: "p", Phase: "execute", State: "running"},
			Audit:      h.entries("session_closed", s.SessionId)})
		got := h.get(s.SessionId)
		if got.State != sessionv1.SessionState_SESSION_STATE_ACTIVE || got.ClosedAt != nil ||
			got.GetTokenUsage().GetInputTokens() != 0 || got.GetTokenUsage().GetCost() != 0 || len(got.LinkedPlans) != 0 {
			h.Fatalf("session after a fenced update: %v", got)
		}
	}},
	{"stale delete is fenced and stores nothing", func(h *harness) {
		s := h.sessionAt(h.msgs(3)...)
		h.ok(&persistence.UpdateSession{Epoch: 1, SessionID: s.SessionId, LinkPlan: &sessionv1.LinkedPlan{PlanId: "p"}})
		h.activate(persistence.OwnerSession, s.SessionId, 2)
		h.fencedOnly(&persistence.DeleteSession{Epoch: 1, SessionID: s.SessionId, Audit: h.entries("session_deleted", s.SessionId)})
		if got := h.get(s.SessionId); got.MessageCount != 3 || len(got.LinkedPlans) != 1 {
			h.Fatalf("session after a fenced delete: %v", got)
		}
		if ms := h.messages(s.SessionId); len(ms) != 3 {
			h.Fatalf("%d messages after a fenced delete, want 3", len(ms))
		}
	}},
	{"stale plan write is fenced and stores nothing", func(h *harness) {
		h.activate(persistence.OwnerPlan, "p", 1)
		h.ok(&persistence.PlanWrite{Epoch: 1, PlanID: "p", ErrorDetailsJSON: `{"a":1}`,
			Records: []*planv1.ErrorRecord{h.record("p", 0, planv1.Phase_PHASE_EXECUTE, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)}})
		h.activate(persistence.OwnerPlan, "p", 2)
		h.fencedOnly(&persistence.PlanWrite{Epoch: 1, PlanID: "p", MaxRetries: int32p(9), ErrorDetailsJSON: `{"a":2}`,
			Records:     []*planv1.ErrorRecord{h.record("p", 1, planv1.Phase_PHASE_EXECUTE, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)},
			StepRetries: []persistence.StepRetry{{Phase: planv1.Phase_PHASE_EXECUTE, StepID: "s", Count: 4}},
			Audit:       h.entries("plan_error_recorded", "")})
		p := h.plan("p")
		if p.NextSequence != 1 || p.MaxRetries != persistence.DefaultMaxRetries || p.ErrorDetailsJSON != `{"a":1}` || len(p.StepRetries) != 0 {
			h.Fatalf("plan after a fenced write: %+v", p)
		}
		// A plan's first write is fenced as well: a stale owner cannot
		// create the row.
		h.activate(persistence.OwnerPlan, "q", 1)
		h.activate(persistence.OwnerPlan, "q", 2)
		h.fencedOnly(&persistence.PlanWrite{Epoch: 1, PlanID: "q"})
		_, err := h.r.GetPlan(h.ctx, "", "q")
		wantCode(h.T, err, errs.NotFoundCode)
	}},
	{"epoch 0 after activation is fenced", func(h *harness) {
		s := h.sessionAt(h.msgs(1)...)
		h.fencedOnly(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 1, Turns: []persistence.Turn{turn(h.msg("x"))}})
		h.fencedOnly(&persistence.UpdateSession{SessionID: s.SessionId, TokenDelta: &sessionv1.TokenUsage{InputTokens: 1}})
		h.fencedOnly(&persistence.DeleteSession{SessionID: s.SessionId})
		h.fencedOnly(&persistence.CreateSession{Session: s})
		h.activate(persistence.OwnerPlan, "p", 1)
		h.fencedOnly(&persistence.PlanWrite{PlanID: "p"})
		if got := h.get(s.SessionId); got.MessageCount != 1 || got.GetTokenUsage().GetInputTokens() != 0 {
			h.Fatalf("session after unfenced writes to an activated key: %v", got)
		}
	}},
	{"an epoch never activated is fenced; epoch 0 is not", func(h *harness) {
		s := h.session()
		h.fencedOnly(&persistence.CreateSession{Epoch: 1, Session: s})
		h.fencedOnly(&persistence.PlanWrite{Epoch: 3, PlanID: "p"})
		// Unfenced writes of keys nobody activated (an import) pass.
		h.ok(&persistence.CreateSession{Session: s, Messages: h.msgs(2)})
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, Turns: []persistence.Turn{turn(h.msg("x"))}})
		h.ok(&persistence.PlanWrite{PlanID: "p"})
		// A future epoch is as wrong as a past one.
		h.activate(persistence.OwnerSession, s.SessionId, 1)
		h.fencedOnly(&persistence.UpdateSession{Epoch: 2, SessionID: s.SessionId, TokenDelta: &sessionv1.TokenUsage{InputTokens: 1}})
	}},
	{"epochs of other keys do not fence", func(h *harness) {
		a, b := h.sessionAt(), h.sessionAt()
		// b's owner is at epoch 3, a's stays at 1; the plan with a's id is
		// another key.
		h.activate(persistence.OwnerSession, b.SessionId, 2)
		h.activate(persistence.OwnerSession, b.SessionId, 3)
		h.activate(persistence.OwnerPlan, a.SessionId, 1)
		h.activate(persistence.OwnerPlan, a.SessionId, 2)
		h.ok(&persistence.AppendMessages{Epoch: 1, SessionID: a.SessionId, NextSequence: 0, Turns: []persistence.Turn{turn(h.msg("a"))}})
		h.ok(&persistence.AppendMessages{Epoch: 3, SessionID: b.SessionId, NextSequence: 0, Turns: []persistence.Turn{turn(h.msg("b"))}})
		h.ok(&persistence.PlanWrite{Epoch: 2, PlanID: a.SessionId})
	}},
	{"in one batch, an activation fences the writes after it and the fenced write fails alone", func(h *harness) {
		a, b := h.sessionAt(), h.sessionAt()
		before := h.audits()
		res := h.apply(
			&persistence.AppendMessages{Epoch: 1, SessionID: a.SessionId, NextSequence: 0, Turns: []persistence.Turn{turn(h.msg("before"))}},
			&persistence.Activate{Kind: persistence.OwnerSession, ID: a.SessionId},
			&persistence.AppendMessages{Epoch: 1, SessionID: a.SessionId, NextSequence: 1, Turns: []persistence.Turn{turn(h.msg("stale"))}},
			&persistence.AppendMessages{Epoch: 1, SessionID: b.SessionId, NextSequence: 0,
				Turns: []persistence.Turn{{Messages: h.msgs(1), Audit: h.entries("message_appended", b.SessionId)}}},
			&persistence.AppendMessages{Epoch: 2, SessionID: a.SessionId, NextSequence: 1, Turns: []persistence.Turn{turn(h.msg("after"))}},
		)
		for _, i := range []int{0, 1, 3, 4} {
			if res[i].Err != nil {
				h.Fatalf("command %d: %v", i, res[i].Err)
			}
		}
		if res[1].Epoch != 2 {
			h.Fatalf("activation in the batch: epoch %d, want 2", res[1].Epoch)
		}
		fenced(h, res[2].Err)
		ms := h.messages(a.SessionId)
		if len(ms) != 2 || ms[0].Content != "before" || ms[1].Content != "after" || ms[1].Sequence != 1 {
			h.Fatalf("messages of the re-activated session: %v", ms)
		}
		if got := len(h.messages(b.SessionId)); got != 1 {
			h.Fatalf("the other session has %d messages, want 1", got)
		}
		if after := h.audits(); after != before+1 {
			h.Fatalf("%d audit entries stored, want 1 (the other session's)", after-before)
		}
		h.verifyChain()
	}},
	{"an activation rolled back with its transaction takes no epoch", func(h *harness) {
		pl, ok := h.store.(PageLimiter)
		if !ok {
			h.Skip("store cannot simulate a full disk (implement storetest.PageLimiter)")
		}
		h.activate(persistence.OwnerSession, "k", 1)
		n, err := pl.PageCount()
		if err != nil {
			h.Fatalf("PageCount: %v", err)
		}
		if err := pl.SetMaxPageCount(n); err != nil {
			h.Fatalf("SetMaxPageCount: %v", err)
		}
		big := h.msgs(64)
		for _, m := range big {
			m.Content = string(make([]byte, 8<<10))
		}
		_, err = h.w.Apply(h.ctx, []persistence.Command{
			&persistence.Activate{Kind: persistence.OwnerSession, ID: "k"},
			&persistence.CreateSession{Session: h.session(), Messages: big},
		})
		wantCode(h.T, err, errs.ResourceExhaustedCode)
		if err := pl.SetMaxPageCount(1 << 30); err != nil {
			h.Fatalf("SetMaxPageCount: %v", err)
		}
		h.activate(persistence.OwnerSession, "k", 2)
	}},
}

// entries makes one audit entry of eventType about sessionID.
func (h *harness) entries(eventType, sessionID string) []*auditv1.AuditEntry {
	return []*auditv1.AuditEntry{h.entry(eventType, func(e *auditv1.AuditEntry) { e.SessionId = sessionID })}
}
