package storetest

import (
	"errors"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// An activation that carries its owner's first write (persistence.Activate
// with Then): the two commit together or not at all, the write counts as
// the new epoch's, and a load that no longer holds refuses both.

// mark is what a load of the session sees now.
func (h *harness) mark(id string) *persistence.SessionMark {
	h.Helper()
	s := h.get(id)
	return &persistence.SessionMark{Exists: true, NextSequence: s.MessageCount, UpdatedAt: s.UpdatedAt.AsTime()}
}

// loadedChanged checks that err is ErrLoadedChanged (FAILED_PRECONDITION).
func loadedChanged(h *harness, err error) {
	h.Helper()
	if !errors.Is(err, persistence.ErrLoadedChanged) {
		h.Fatalf("got %v, want ErrLoadedChanged", err)
	}
	wantCode(h.T, err, errs.FailedPreconditionCode)
}

var foldedCases = []testCase{
	{"an activation carries the first append as the new epoch's write", func(h *harness) {
		s := h.sessionAt(h.msgs(2)...)
		m := h.mark(s.SessionId)
		app := &persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, UpdatedAt: h.now(),
			Turns: []persistence.Turn{turn(h.msg("x"))}}
		res := h.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId, Loaded: m, Then: app})
		if out := app.ResultOf(res); res.Epoch != 2 || out.NextSequence != 3 || len(out.Turns) != 1 || out.Turns[0].Err != nil {
			h.Fatalf("folded append: epoch %d, next %d, turns %+v", res.Epoch, out.NextSequence, out.Turns)
		}
		// The old epoch is fenced; the new one writes on.
		h.fencedOnly(&persistence.AppendMessages{Epoch: 1, SessionID: s.SessionId, NextSequence: 3, Turns: []persistence.Turn{turn(h.msg("y"))}})
		h.ok(&persistence.AppendMessages{Epoch: 2, SessionID: s.SessionId, NextSequence: 3, Turns: []persistence.Turn{turn(h.msg("z"))}})
		if ms := h.messages(s.SessionId); len(ms) != 4 {
			h.Fatalf("%d messages, want 4", len(ms))
		}
	}},
	{"an activation carries a create without a load", func(h *harness) {
		s := h.session()
		res := h.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId,
			Then: &persistence.CreateSession{Session: s, Audit: h.entries("session_created", s.SessionId)}})
		if res.Epoch != 1 {
			h.Fatalf("folded create: epoch %d, want 1", res.Epoch)
		}
		h.get(s.SessionId)
		h.ok(&persistence.AppendMessages{Epoch: 1, SessionID: s.SessionId, NextSequence: 0, Turns: []persistence.Turn{turn(h.msg("x"))}})
	}},
	{"a create folded into the activation of an id activated before takes the next epoch", func(h *harness) {
		s := h.session()
		// An owner activated the id (epoch 1) but never created it; a
		// create that took epoch 1 again would let that owner write on.
		h.activate(persistence.OwnerSession, s.SessionId, 1)
		res := h.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId,
			Then: &persistence.CreateSession{Session: s, Audit: h.entries("session_created", s.SessionId)}})
		if res.Epoch != 2 {
			h.Fatalf("folded create after an activation: epoch %d, want 2", res.Epoch)
		}
		h.fencedOnly(&persistence.AppendMessages{Epoch: 1, SessionID: s.SessionId, NextSequence: 0, Turns: []persistence.Turn{turn(h.msg("x"))}})
		h.ok(&persistence.AppendMessages{Epoch: 2, SessionID: s.SessionId, NextSequence: 0, Turns: []persistence.Turn{turn(h.msg("y"))}})
		h.activate(persistence.OwnerSession, s.SessionId, 3)
	}},
	{"a folded write that fails rolls its activation back", func(h *harness) {
		s := h.sessionAt()
		before := h.audits()
		// The session exists: the create fails, and epoch 2 is not taken.
		h.fails(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId,
			Then: &persistence.CreateSession{Session: s, Audit: h.entries("session_created", s.SessionId)}}, errs.AlreadyExistsCode)
		if after := h.audits(); after != before {
			h.Fatalf("a failed folded create stored %d audit entries", after-before)
		}
		h.ok(&persistence.AppendMessages{Epoch: 1, SessionID: s.SessionId, NextSequence: 0, Turns: []persistence.Turn{turn(h.msg("x"))}})
		// A stale sequence fails the append, and the activation with it.
		h.fails(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId, Loaded: h.mark(s.SessionId),
			Then: &persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 0, Turns: []persistence.Turn{turn(h.msg("y"))}}},
			errs.FailedPreconditionCode)
		h.activate(persistence.OwnerSession, s.SessionId, 2)
	}},
	{"a session written after the load refuses the folded write", func(h *harness) {
		s := h.sessionAt(h.msgs(1)...)
		m := h.mark(s.SessionId)
		// The previous owner (epoch 1) writes after the load, without
		// moving the sequence: only updated_at tells.
		h.ok(&persistence.UpdateSession{Epoch: 1, SessionID: s.SessionId, UpdatedAt: h.now(),
			TokenDelta: &sessionv1.TokenUsage{InputTokens: 3}})
		before := h.audits()
		loadedChanged(h, h.apply(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId, Loaded: m,
			Then: &persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 1, UpdatedAt: h.now(),
				Turns: []persistence.Turn{{Messages: h.msgs(1), Audit: h.entries("message_appended", s.SessionId)}}}})[0].Err)
		if ms := h.messages(s.SessionId); len(ms) != 1 || h.audits() != before {
			h.Fatalf("a refused folded append stored %d messages, %d audit entries", len(ms)-1, h.audits()-before)
		}
		// Nothing was taken: epoch 1 still writes, the next activation is 2.
		h.ok(&persistence.AppendMessages{Epoch: 1, SessionID: s.SessionId, NextSequence: 1, Turns: []persistence.Turn{turn(h.msg("x"))}})
		h.activate(persistence.OwnerSession, s.SessionId, 2)
		// A load that found no session is stale once it exists.
		loadedChanged(h, h.apply(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId,
			Loaded: &persistence.SessionMark{}, Then: &persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2,
				Turns: []persistence.Turn{turn(h.msg("y"))}}})[0].Err)
	}},
	{"only a session's create or append is folded, for its own id", func(h *harness) {
		s := h.sessionAt()
		h.fails(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId,
			Then: &persistence.UpdateSession{SessionID: s.SessionId, UpdatedAt: h.now()}}, errs.InvalidArgumentCode)
		h.fails(&persistence.Activate{Kind: persistence.OwnerSession, ID: "other",
			Then: &persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(h.msg("x"))}}}, errs.InvalidArgumentCode)
		h.fails(&persistence.Activate{Kind: persistence.OwnerPlan, ID: s.SessionId,
			Then: &persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(h.msg("x"))}}}, errs.InvalidArgumentCode)
		// None took an epoch.
		h.activate(persistence.OwnerSession, s.SessionId, 2)
	}},
	{"a blind append takes the stored sequence and state, and reports them", func(h *harness) {
		s := h.session()
		h.activate(persistence.OwnerSession, s.SessionId, 1)
		h.ok(&persistence.CreateSession{Epoch: 1, Session: s, State: `{"a":1}`, Messages: h.msgs(2)})
		at := h.get(s.SessionId).UpdatedAt.AsTime()
		// The command's own sequence and state are what an owner that
		// loaded nothing has: ignored.
		app := &persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 0, UpdatedAt: h.now(),
			Turns: []persistence.Turn{turn(h.msg("x")), {Messages: h.msgs(1), State: set("b", "2")}}}
		res := h.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId, Then: app})
		out := app.ResultOf(res)
		if res.Epoch != 2 || out.NextSequence != 4 || len(out.Turns) != 2 || out.Turns[0].Err != nil || out.Turns[1].Err != nil {
			h.Fatalf("blind append: epoch %d, next %d, turns %+v", res.Epoch, out.NextSequence, out.Turns)
		}
		if out.Turns[0].Messages[0].GetSequence() != 2 || out.Turns[1].Messages[0].GetSequence() != 3 {
			h.Fatalf("blind append stored sequences %d, %d, want 2, 3", out.Turns[0].Messages[0].GetSequence(), out.Turns[1].Messages[0].GetSequence())
		}
		hd := res.Head
		if hd == nil || hd.NextSequence != 2 || !hd.UpdatedAt.Equal(at) {
			h.Fatalf("blind append's head %+v, want next 2 and updated_at %v", hd, at)
		}
		wantJSON(h, "head state", hd.State, `{"a":1}`)
		wantJSON(h, "result state", out.State, `{"a":1,"b":2}`)
		state, next := h.state(s.SessionId)
		wantJSON(h, "stored state", state, `{"a":1,"b":2}`)
		if ms := h.messages(s.SessionId); next != 4 || len(ms) != 4 {
			h.Fatalf("after a blind append: next %d, %d messages, want 4", next, len(ms))
		}
		// The new epoch writes on; the old one is fenced.
		h.fencedOnly(&persistence.AppendMessages{Epoch: 1, SessionID: s.SessionId, NextSequence: 4, Turns: []persistence.Turn{turn(h.msg("y"))}})
		h.ok(&persistence.AppendMessages{Epoch: 2, SessionID: s.SessionId, NextSequence: 4, Turns: []persistence.Turn{turn(h.msg("z"))}})
	}},
	{"a blind append sees the older owner's append of the same transaction", func(h *harness) {
		s := h.sessionAt(h.msgs(1)...)
		// The older owner's append and the newer owner's blind one reach
		// the writer together: the newer decides on what the older stored.
		blindApp := &persistence.AppendMessages{SessionID: s.SessionId, UpdatedAt: h.now(), Turns: []persistence.Turn{turn(h.msg("new"))}}
		res := h.apply(&persistence.AppendMessages{Epoch: 1, SessionID: s.SessionId, NextSequence: 1, UpdatedAt: h.now(),
			Turns: []persistence.Turn{turn(h.msg("old"))}},
			&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId, Then: blindApp})
		if next := blindApp.ResultOf(res[1]).NextSequence; res[0].Err != nil || res[1].Err != nil || res[1].Head == nil || res[1].Head.NextSequence != 2 || next != 3 {
			h.Fatalf("older append %v; blind append %v, head %+v, next %d", res[0].Err, res[1].Err, res[1].Head, next)
		}
		ms := h.messages(s.SessionId)
		for i, m := range ms {
			if m.GetSequence() != int64(i) {
				h.Fatalf("message %d has sequence %d", i, m.GetSequence())
			}
		}
		if len(ms) != 3 || ms[2].GetContent() != "new" {
			h.Fatalf("%d messages, the last %q; want 3, the blind append's last", len(ms), ms[len(ms)-1].GetContent())
		}
	}},
	{"a blind append to a missing, closed or staged session stores nothing", func(h *harness) {
		blind := func(id string) *persistence.Activate {
			return &persistence.Activate{Kind: persistence.OwnerSession, ID: id,
				Then: &persistence.AppendMessages{SessionID: id, UpdatedAt: h.now(),
					Turns: []persistence.Turn{{Messages: h.msgs(1), Audit: h.entries("message_appended", id)}}}}
		}
		refused := func(id string, epoch int64) {
			h.Helper()
			before := h.audits()
			err := h.apply(blind(id))[0].Err
			if !errors.Is(err, persistence.ErrBlindRefused) {
				h.Fatalf("blind append to %s: %v, want ErrBlindRefused", id, err)
			}
			wantCode(h.T, err, errs.FailedPreconditionCode)
			if h.audits() != before {
				h.Fatalf("a refused blind append stored %d audit entries", h.audits()-before)
			}
			// The refused command took no epoch.
			h.activate(persistence.OwnerSession, id, epoch)
		}
		refused("missing", 1)
		if _, err := h.r.GetSession(h.ctx, "missing"); errs.CodeOf(err) != errs.NotFoundCode {
			h.Fatalf("a refused blind append created its session: %v", err)
		}
		closed := h.sessionAt()
		h.ok(&persistence.UpdateSession{Epoch: 1, SessionID: closed.SessionId, State: sessionv1.SessionState_SESSION_STATE_CLOSED,
			ClosedAt: h.now(), UpdatedAt: h.now()})
		refused(closed.SessionId, 2)
		if ms := h.messages(closed.SessionId); len(ms) != 0 {
			h.Fatalf("a closed session took %d messages", len(ms))
		}
		staged := h.session(func(s *sessionv1.Session) { s.State = persistence.SessionStateStaged })
		h.ok(&persistence.CreateSession{Session: staged})
		refused(staged.SessionId, 1)
	}},
}
