package storetest

import (
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// Shared-scope deltas in batches whose other commands fail. A scope's
// delta reads the scope inside the transaction, so a store that batches
// statements (PostgreSQL's pipeline) sends what it held before that read:
// the failure of an earlier turn or command surfaces there, and must stay
// that earlier command's (or make the store replay the batch), never
// become the later turn's own error while the earlier one is answered as
// stored. These cases are how a retried turn was once acknowledged at a
// new sequence it was never stored at (and the session's next sequence
// ran ahead of the store's), and how one stale append made a whole batch
// fail with "current transaction is aborted".

var scopeBatchCases = []testCase{
	{"a retried turn ahead of a turn with a scope delta is a duplicate, and the new turn is stored", func(h *harness) {
		s := h.create()
		ms := h.msgs(2)
		first := persistence.Turn{Messages: ms, State: set("t", `1`), Scopes: scope("app:s", set(s.SessionId, `1`))}
		r := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, UpdatedAt: h.now(), Turns: []persistence.Turn{first}})
		// The first turn's answer was lost: its owner retries it, pooled
		// with a new turn that also writes the scope.
		retry := persistence.Turn{Messages: clone(ms...), State: set("t", `1`), Scopes: scope("app:s", set(s.SessionId, `1`))}
		fresh := persistence.Turn{Messages: h.msgs(1), State: set("t", `2`), Scopes: scope("app:s", set(s.SessionId, `2`))}
		res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, State: r.State, UpdatedAt: h.now(),
			Turns: []persistence.Turn{retry, fresh}})
		if !res.Turns[0].Duplicate || res.Turns[0].Err != nil {
			h.Fatalf("the retry: duplicate %v, err %v, messages %v", res.Turns[0].Duplicate, res.Turns[0].Err, res.Turns[0].Messages)
		}
		checkTurn(h, res.Turns[0], s.SessionId, 0, ms)
		if res.Turns[1].Err != nil {
			h.Fatalf("the new turn: %v", res.Turns[1].Err)
		}
		checkTurn(h, res.Turns[1], s.SessionId, 2, fresh.Messages)
		if res.NextSequence != 3 {
			h.Fatalf("next sequence %d, want 3", res.NextSequence)
		}
		st, next := h.state(s.SessionId)
		wantJSON(h, "state", st, `{"t":2}`)
		wantJSON(h, "scope", h.scopeState("app:s"), `{"`+s.SessionId+`":2}`)
		if next != 3 || len(h.messages(s.SessionId)) != 3 {
			h.Fatalf("stored: next %d, %d messages; want 3 and 3", next, len(h.messages(s.SessionId)))
		}
	}},
	{"a retried turn in one command and a scope delta in the next: each gets its own answer", func(h *harness) {
		a, b := h.create(), h.create()
		ms := h.msgs(1)
		h.ok(&persistence.AppendMessages{SessionID: a.SessionId, UpdatedAt: h.now(),
			Turns: []persistence.Turn{{Messages: ms, Scopes: scope("app:s", set(a.SessionId, `1`))}}})
		retry := &persistence.AppendMessages{SessionID: a.SessionId, NextSequence: 1, UpdatedAt: h.now(),
			Turns: []persistence.Turn{{Messages: clone(ms...), Scopes: scope("app:s", set(a.SessionId, `1`))}}}
		other := &persistence.AppendMessages{SessionID: b.SessionId, UpdatedAt: h.now(),
			Turns: []persistence.Turn{{Messages: h.msgs(1), Scopes: scope("app:s", set(b.SessionId, `1`))}}}
		res := h.apply(retry, other)
		if t := retry.ResultOf(res[0]).Turns; res[0].Err != nil || !t[0].Duplicate {
			h.Fatalf("the retry: %v, duplicate %v, messages %v", res[0].Err, t[0].Duplicate, t[0].Messages)
		}
		checkTurn(h, retry.ResultOf(res[0]).Turns[0], a.SessionId, 0, ms)
		if res[1].Err != nil || other.ResultOf(res[1]).Turns[0].Err != nil {
			h.Fatalf("the other session's turn: %v / %v", res[1].Err, other.ResultOf(res[1]).Turns[0].Err)
		}
		if _, next := h.state(a.SessionId); next != 1 {
			h.Fatalf("the retried session's next sequence is %d, want 1", next)
		}
		if got := h.messages(b.SessionId); len(got) != 1 {
			h.Fatalf("the other session holds %d messages, want 1", len(got))
		}
		wantJSON(h, "scope", h.scopeState("app:s"), `{"`+a.SessionId+`":1,"`+b.SessionId+`":1}`)
	}},
	{"a stale append fails alone in a batch whose next command writes scopes turn after turn", func(h *harness) {
		a, b := h.create(h.msgs(2)...), h.create()
		other := &persistence.AppendMessages{SessionID: b.SessionId, UpdatedAt: h.now(), Turns: []persistence.Turn{
			{Messages: h.msgs(1), Scopes: scope("app:s", set("b", `1`))},
			{Messages: h.msgs(1), Scopes: scope("app:s", set("b", `2`))},
		}}
		res := h.apply(
			// Stale: sequences 0 and 1 are taken.
			&persistence.AppendMessages{SessionID: a.SessionId, NextSequence: 0, UpdatedAt: h.now(),
				Turns: []persistence.Turn{{Messages: h.msgs(1), Scopes: scope("app:s", set("a", `1`))}}},
			other,
		)
		wantCode(h.T, res[0].Err, errs.FailedPreconditionCode)
		if t := other.ResultOf(res[1]).Turns; res[1].Err != nil || t[0].Err != nil || t[1].Err != nil {
			h.Fatalf("the other command: %v / %v / %v", res[1].Err, t[0].Err, t[1].Err)
		}
		if got := h.messages(a.SessionId); len(got) != 2 {
			h.Fatalf("the stale append stored something: %d messages", len(got))
		}
		if _, next := h.state(b.SessionId); next != 2 {
			h.Fatalf("next sequence %d, want 2", next)
		}
		wantJSON(h, "scope", h.scopeState("app:s"), `{"b":2}`)
	}},
}
