package storetest

import (
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// The ids replacements removed are remembered with their content's digest
// (issue 30: a removed id may be used again only with the same content).

var removedIDCases = []testCase{
	{"an id an earlier replacement removed comes back only with its content, and is forgotten with the session", func(h *harness) {
		old := h.msgs(3)
		s := h.create(old...)
		h.ok(h.replace(s.SessionId, 1, 3, h.msg("n1")))
		changed := func(m *sessionv1.Message) *sessionv1.Message {
			c := clone(m)[0]
			c.Content = "other " + c.Content
			return c
		}
		// A later replacement and an append, with other content: refused.
		h.fails(h.replace(s.SessionId, 1, 2, changed(old[2])), errs.AlreadyExistsCode)
		n1, fine := h.messages(s.SessionId)[1], h.msg("fine")
		app := &persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2,
			Turns: []persistence.Turn{turn(fine), turn(changed(old[1]))}}
		res := h.appendOK(app)
		if len(res.Turns) != 2 || res.Turns[0].Err != nil || errs.CodeOf(res.Turns[1].Err) != errs.AlreadyExistsCode {
			h.Fatalf("append of a removed id with other content: %+v", res.Turns)
		}
		if res.NextSequence != 3 {
			h.Fatalf("next %d after one stored turn", res.NextSequence)
		}
		// The same content: a new message, by append or by replacement.
		if r := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 3,
			Turns: []persistence.Turn{turn(clone(old[1])...)}}); r.Turns[0].Err != nil || r.Turns[0].Messages[0].Sequence != 3 {
			h.Fatalf("append of a removed id with its content: %+v", r.Turns[0])
		}
		h.ok(h.replace(s.SessionId, 4, 4, clone(old[2])...))
		// Its retry, decided at the head it made, is the duplicate.
		retry := h.replace(s.SessionId, 4, 4, clone(old[2])...)
		retry.NextSequence = 5
		if !retry.ResultOf(h.ok(retry)).Duplicate {
			h.Fatalf("the retry is not a duplicate")
		}
		sameIDs(h, "history", h.messages(s.SessionId), []*sessionv1.Message{old[0], n1, fine, old[1], old[2]})
		// Deleted with the session: a new session of the same id may use
		// the id with any content.
		h.ok(&persistence.DeleteSession{SessionID: s.SessionId})
		h.ok(&persistence.CreateSession{Session: h.session(func(x *sessionv1.Session) { x.SessionId = s.SessionId })})
		if r := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 0,
			Turns: []persistence.Turn{turn(changed(old[2]))}}); r.Turns[0].Err != nil {
			h.Fatalf("a deleted session's removed ids outlived it: %v", r.Turns[0].Err)
		}
	}},
}
