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
		res := h.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId, Loaded: m,
			Then: &persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, UpdatedAt: h.now(),
				Turns: []persistence.Turn{turn(h.msg("x"))}}})
		if res.Epoch != 2 || res.NextSequence != 3 || len(res.Turns) != 1 || res.Turns[0].Err != nil {
			h.Fatalf("folded append: epoch %d, next %d, turns %+v", res.Epoch, res.NextSequence, res.Turns)
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
		h.fails(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId,
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
}
