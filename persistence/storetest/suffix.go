package storetest

import (
	"errors"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// Replacing a session's newest messages (issue 30).

// replace is a ReplaceSuffix of s's messages from from, decided at next
// (expected the same), storing ms.
func (h *harness) replace(id string, from, next int64, ms ...*sessionv1.Message) *persistence.ReplaceSuffix {
	return &persistence.ReplaceSuffix{SessionID: id, From: from, Expected: next, NextSequence: next,
		Turn: persistence.Turn{Messages: clone(ms...)}, UpdatedAt: h.now()}
}

func seqIDs(ms []*sessionv1.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.GetMessageId()
	}
	return out
}

func sameIDs(h *harness, what string, got, want []*sessionv1.Message) {
	h.Helper()
	g, w := seqIDs(got), seqIDs(want)
	if len(g) != len(w) {
		h.Fatalf("%s: %v, want %v", what, g, w)
	}
	for i := range g {
		if g[i] != w[i] {
			h.Fatalf("%s: %v, want %v", what, g, w)
		}
	}
}

var suffixCases = []testCase{
	{"a replacement removes the suffix, answers it, and continues the history at the cut", func(h *harness) {
		old := h.msgs(5)
		s := h.create(old...)
		h.ok(&persistence.PutSnapshot{SessionID: s.SessionId, Snapshot: &sessionv1.Snapshot{Sequence: 3, Data: []byte("x"), CreatedAt: h.ts()}})
		e := h.entry("session.rewound", func(en *auditv1.AuditEntry) { en.SessionId = s.SessionId })
		repl := h.msgs(2)
		cmd := h.replace(s.SessionId, 3, 5, repl...)
		cmd.Audit = []*auditv1.AuditEntry{e}
		res := cmd.ResultOf(h.ok(cmd))
		if res.Duplicate || res.NextSequence != 5 {
			h.Fatalf("result %+v", res)
		}
		sameIDs(h, "removed", res.Removed, old[3:])
		if res.Removed[0].Sequence != 3 || res.Removed[0].Content != old[3].Content {
			h.Fatalf("removed[0] %v", res.Removed[0])
		}
		if len(res.Messages) != 2 || res.Messages[0].Sequence != 3 || res.Messages[1].Sequence != 4 {
			h.Fatalf("stored %v", res.Messages)
		}
		ms := h.messages(s.SessionId)
		sameIDs(h, "history", ms, append(clone(old[:3]...), repl...))
		for i, m := range ms {
			if m.Sequence != int64(i) {
				h.Fatalf("history not dense: %v", ms)
			}
		}
		got := h.get(s.SessionId)
		if got.MessageCount != 5 || !got.UpdatedAt.AsTime().Equal(cmd.UpdatedAt) {
			h.Fatalf("session after: next %d, updated %v", got.MessageCount, got.UpdatedAt.AsTime())
		}
		if snap, err := h.r.GetSnapshot(h.ctx, s.SessionId); err == nil && snap != nil {
			h.Fatalf("a snapshot covering removed messages survived: %v", snap)
		}
		if rw, ok := h.apply(h.replace(s.SessionId, 5, 5))[0].Rewound(); !ok || rw != (persistence.Rewind{From: 5, Previous: 5}) {
			h.Fatalf("an empty replacement at the end: rewind %+v %v", rw, ok)
		}
		if h.countType("session.rewound") != 1 {
			h.Fatalf("audit entry not stored once")
		}
		// Shorter, then an append continues at the new next sequence.
		pop := h.replace(s.SessionId, 2, 5)
		r := h.ok(pop)
		if rw, _ := r.Rewound(); rw != (persistence.Rewind{From: 2, Previous: 5}) || len(pop.ResultOf(r).Removed) != 3 {
			h.Fatalf("pop: %+v", pop.ResultOf(r))
		}
		a := h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, UpdatedAt: h.now(), Turns: []persistence.Turn{turn(h.msg("z"))}})
		if a.Turns[0].Messages[0].Sequence != 2 {
			h.Fatalf("append after pop at %d", a.Turns[0].Messages[0].Sequence)
		}
		// The removed ids are free again, for their own content.
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 3, UpdatedAt: h.now(), Turns: []persistence.Turn{turn(clone(repl[0])...)}})
	}},
	{"a retried replacement is a duplicate that writes nothing", func(h *harness) {
		s := h.create(h.msgs(4)...)
		repl := h.msgs(3)
		first := h.replace(s.SessionId, 1, 4, repl...)
		h.ok(first)
		audits := h.audits()
		// Decided at a head the session no longer stands at: refused.
		stale := h.replace(s.SessionId, 1, 7, repl...)
		h.fails(stale, errs.FailedPreconditionCode)
		// The retry: same cut, same expectation, decided at the head
		// now (1 + 3 = 4, by chance the expectation too).
		retry := h.replace(s.SessionId, 1, 4, repl...)
		got := retry.ResultOf(h.ok(retry))
		if !got.Duplicate || got.NextSequence != 4 || len(got.Removed) != 0 {
			h.Fatalf("retry: %+v", got)
		}
		sameIDs(h, "retry's messages", got.Messages, repl)
		if _, ok := h.apply(retry)[0].Rewound(); ok {
			h.Fatalf("a duplicate reports a rewind")
		}
		if h.audits() != audits {
			h.Fatalf("a duplicate wrote audit entries")
		}
		// A different replacement at a moved head is a mismatch.
		other := h.replace(s.SessionId, 1, 3, h.msg("other"))
		other.NextSequence = 4
		var mm *persistence.SequenceMismatchError
		if err := h.apply(other)[0].Err; !errors.As(err, &mm) || mm.Next != 4 || mm.Expected != 3 {
			h.Fatalf("mismatch: %v", err)
		}
	}},
	{"a replacement refuses taken ids, other content for a removed id, a closed session and a bad cut", func(h *harness) {
		old := h.msgs(4)
		s := h.create(old...)
		h.fails(h.replace(s.SessionId, 2, 4, clone(old[1])...), errs.AlreadyExistsCode)
		changed := clone(old[3])[0]
		changed.Content = "other"
		h.fails(h.replace(s.SessionId, 2, 4, changed), errs.AlreadyExistsCode)
		// The same content under a removed id is allowed.
		kept := h.replace(s.SessionId, 2, 4, clone(old[3])...)
		if r := kept.ResultOf(h.ok(kept)); r.Messages[0].Sequence != 2 || len(r.Removed) != 2 {
			h.Fatalf("reuse: %+v", r)
		}
		h.fails(h.replace(s.SessionId, 4, 3), errs.InvalidArgumentCode)
		h.ok(&persistence.TruncateSession{SessionID: s.SessionId, Through: 0, UpdatedAt: h.now()})
		h.fails(h.replace(s.SessionId, 0, 3), errs.FailedPreconditionCode)
		h.fails(h.replace(h.session().SessionId, 0, 0), errs.NotFoundCode)
		h.ok(&persistence.UpdateSession{SessionID: s.SessionId, State: sessionv1.SessionState_SESSION_STATE_CLOSED, ClosedAt: h.now(), UpdatedAt: h.now()})
		h.fails(h.replace(s.SessionId, 2, 3), errs.FailedPreconditionCode)
		if ms := h.messages(s.SessionId); len(ms) != 2 {
			h.Fatalf("refusals changed the history: %v", ms)
		}
	}},
	{"a replacement's deltas apply and a bad one stores nothing", func(h *harness) {
		s := h.create(h.msgs(3)...)
		cmd := h.replace(s.SessionId, 1, 3, h.msg("n"))
		cmd.Turn.State, cmd.Turn.Scopes = set("k", `1`), scope("app:r", set("n", `2`))
		if r := cmd.ResultOf(h.ok(cmd)); r.State == "" {
			h.Fatalf("no state after: %+v", r)
		}
		st, next := h.state(s.SessionId)
		wantJSON(h, "state", st, `{"k":1}`)
		wantJSON(h, "scope", h.scopeState("app:r"), `{"n":2}`)
		if next != 2 {
			h.Fatalf("next %d", next)
		}
		dup := h.msgs(2)
		dup[1].MessageId = dup[0].MessageId
		h.fails(h.replace(s.SessionId, 0, 2, dup...), errs.InvalidArgumentCode)
		if ms := h.messages(s.SessionId); len(ms) != 2 {
			h.Fatalf("a failed replacement removed messages: %v", ms)
		}
	}},
	{"a replacement too large to answer is refused", func(h *harness) {
		s := h.create(h.msgs(persistence.MaxSuffixRemoved + 1)...)
		h.fails(h.replace(s.SessionId, 0, persistence.MaxSuffixRemoved+1), errs.FailedPreconditionCode)
		h.ok(h.replace(s.SessionId, 1, persistence.MaxSuffixRemoved+1))
	}},
}

// countType counts the stored audit entries of one event type.
func (h *harness) countType(eventType string) int {
	h.Helper()
	n := 0
	for _, e := range h.scan() {
		if e.GetEventType() == eventType {
			n++
		}
	}
	return n
}
