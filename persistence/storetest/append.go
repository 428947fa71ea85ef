package storetest

import (
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

func turn(ms ...*sessionv1.Message) persistence.Turn { return persistence.Turn{Messages: ms} }

// clone copies messages, so that a retry is a different value with the
// same ids, as a client's retry would be.
func clone(ms ...*sessionv1.Message) []*sessionv1.Message {
	out := make([]*sessionv1.Message, len(ms))
	for i, m := range ms {
		out[i] = proto.Clone(m).(*sessionv1.Message)
	}
	return out
}

func checkTurn(h *harness, tr persistence.TurnResult, sessionID string, first int64, in []*sessionv1.Message) {
	h.Helper()
	if tr.Err != nil {
		h.Fatalf("turn failed: %v", tr.Err)
	}
	if len(tr.Messages) != len(in) {
		h.Fatalf("turn returned %d messages, want %d", len(tr.Messages), len(in))
	}
	for i, m := range tr.Messages {
		want := proto.Clone(in[i]).(*sessionv1.Message)
		want.SessionId, want.Sequence = sessionID, first+int64(i)
		if !proto.Equal(m, want) {
			h.Fatalf("turn message %d:\n got %v\nwant %v", i, m, want)
		}
	}
}

var appendCases = []testCase{
	{"assigns dense sequences and bumps updated_at", func(h *harness) {
		s := h.create()
		a, b := h.msgs(2), h.msgs(3)
		updated := h.now()
		res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 0, UpdatedAt: updated,
			Turns: []persistence.Turn{turn(a...), turn(b...)}})
		if res.NextSequence != 5 || len(res.Turns) != 2 {
			h.Fatalf("result: next %d, %d turns", res.NextSequence, len(res.Turns))
		}
		checkTurn(h, res.Turns[0], s.SessionId, 0, a)
		checkTurn(h, res.Turns[1], s.SessionId, 2, b)
		got := h.get(s.SessionId)
		if got.MessageCount != 5 || !got.UpdatedAt.AsTime().Equal(updated) {
			h.Fatalf("session after append: %v", got)
		}
		res = h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 5, Turns: []persistence.Turn{turn(h.msg("more"))}})
		if res.NextSequence != 6 || res.Turns[0].Messages[0].Sequence != 5 {
			h.Fatalf("second append: %+v", res)
		}
		stored := h.messages(s.SessionId)
		for i, m := range stored {
			if m.Sequence != int64(i) {
				h.Fatalf("stored sequence %d at index %d", m.Sequence, i)
			}
		}
	}},
	{"after import continues the sequence", func(h *harness) {
		s := h.create(h.msgs(3)...)
		res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 3, Turns: []persistence.Turn{turn(h.msg("x"))}})
		if res.Turns[0].Messages[0].Sequence != 3 || res.NextSequence != 4 {
			h.Fatalf("append after import: %+v", res)
		}
	}},
	{"duplicate turn returns the originals and writes nothing", func(h *harness) {
		s := h.create()
		orig := h.msgs(2)
		first := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 0, UpdatedAt: h.now(),
			Turns: []persistence.Turn{{Messages: orig, Audit: []*auditv1.AuditEntry{h.entry("appended")}}}})
		before := h.get(s.SessionId)
		// A retry is the same turn; only its time is new.
		retry := clone(orig...)
		for _, m := range retry {
			m.CreatedAt = h.ts()
		}
		dupAudit := h.entry("appended")
		res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, UpdatedAt: h.now(),
			Turns: []persistence.Turn{{Messages: retry, Audit: []*auditv1.AuditEntry{dupAudit}}}})
		tr := res.Turns[0]
		if !tr.Duplicate || tr.Err != nil || res.NextSequence != 2 {
			h.Fatalf("retry: %+v", res)
		}
		for i, m := range tr.Messages {
			if !proto.Equal(m, first.Turns[0].Messages[i]) {
				h.Fatalf("duplicate returned %v, want the original %v", m, first.Turns[0].Messages[i])
			}
		}
		if after := h.get(s.SessionId); !proto.Equal(after, before) {
			h.Fatalf("duplicate changed the session:\n got %v\nwant %v", after, before)
		}
		if dupAudit.Position != 0 || dupAudit.Hash != "" {
			h.Fatalf("a duplicate turn's audit entry was assigned: %v", dupAudit)
		}
		if n := len(h.scan()); n != 1 {
			h.Fatalf("%d audit entries, want 1", n)
		}
	}},
	{"partially stored turn fails alone", func(h *harness) {
		s := h.create()
		stored := h.msg("stored")
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(stored)}})
		good := h.msg("good")
		res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 1, Turns: []persistence.Turn{
			turn(h.msg("new"), clone(stored)[0]),
			turn(clone(stored)[0], h.msg("new too")),
			turn(good),
		}})
		for _, tr := range res.Turns[:2] {
			wantCode(h.T, tr.Err, errs.AlreadyExistsCode)
			if !strings.Contains(tr.Err.Error(), stored.MessageId) {
				h.Fatalf("%v does not name the stored id %s", tr.Err, stored.MessageId)
			}
		}
		checkTurn(h, res.Turns[2], s.SessionId, 1, []*sessionv1.Message{good})
		if res.NextSequence != 2 {
			h.Fatalf("next sequence %d, want 2", res.NextSequence)
		}
		ms := h.messages(s.SessionId)
		if len(ms) != 2 || ms[0].Content != "stored" || ms[1].Content != "good" {
			h.Fatalf("stored messages %v", ms)
		}
	}},
	{"a stored id reused for anything but a retry of its turn is ALREADY_EXISTS", func(h *harness) {
		s := h.create()
		orig := h.msgs(3)
		orig[1].MetadataJson = `{"k":1}`
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(orig...)}})
		before, entries := h.get(s.SessionId), len(h.scan())
		for name, edit := range map[string]func(ms []*sessionv1.Message) []*sessionv1.Message{
			"content":   func(ms []*sessionv1.Message) []*sessionv1.Message { ms[1].Content = "changed"; return ms },
			"role":      func(ms []*sessionv1.Message) []*sessionv1.Message { ms[1].Role = sessionv1.Role_ROLE_TOOL; return ms },
			"metadata":  func(ms []*sessionv1.Message) []*sessionv1.Message { ms[1].MetadataJson = `{"k":2}`; return ms },
			"no meta":   func(ms []*sessionv1.Message) []*sessionv1.Message { ms[1].MetadataJson = ""; return ms },
			"order":     func(ms []*sessionv1.Message) []*sessionv1.Message { ms[1], ms[2] = ms[2], ms[1]; return ms },
			"a gap":     func(ms []*sessionv1.Message) []*sessionv1.Message { return []*sessionv1.Message{ms[0], ms[2]} },
			"with news": func(ms []*sessionv1.Message) []*sessionv1.Message { return append(ms, h.msg("new")) },
		} {
			retry := edit(clone(orig...))
			e := h.entry("appended")
			res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 3, UpdatedAt: h.now(),
				Turns: []persistence.Turn{{Messages: retry, Audit: []*auditv1.AuditEntry{e}}}})
			tr := res.Turns[0]
			wantCode(h.T, tr.Err, errs.AlreadyExistsCode)
			if tr.Duplicate || res.NextSequence != 3 || e.Position != 0 {
				h.Fatalf("%s: %+v, audit position %d", name, res, e.Position)
			}
			named := false
			for _, m := range orig {
				named = named || strings.Contains(tr.Err.Error(), m.MessageId)
			}
			if !named {
				h.Fatalf("%s: %v names no stored id", name, tr.Err)
			}
		}
		if after := h.get(s.SessionId); !proto.Equal(after, before) || len(h.scan()) != entries {
			h.Fatalf("refused reuses changed the session:\n got %v\nwant %v", after, before)
		}
		for i, m := range h.messages(s.SessionId) {
			if m.Content != orig[i].Content || m.MetadataJson != orig[i].MetadataJson || m.Role != orig[i].Role {
				h.Fatalf("stored message %d changed: %v", i, m)
			}
		}
		// The exact retry is still a duplicate.
		res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 3, Turns: []persistence.Turn{turn(clone(orig...)...)}})
		if !res.Turns[0].Duplicate || res.Turns[0].Err != nil {
			h.Fatalf("exact retry: %+v", res.Turns[0])
		}
	}},
	{"duplicate and new turns in one command", func(h *harness) {
		s := h.create()
		a := h.msg("a")
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(a)}})
		b := h.msg("b")
		res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 1,
			Turns: []persistence.Turn{turn(clone(a)...), turn(b), turn(clone(b)...)}})
		if !res.Turns[0].Duplicate || res.Turns[0].Messages[0].Sequence != 0 {
			h.Fatalf("turn 0: %+v", res.Turns[0])
		}
		checkTurn(h, res.Turns[1], s.SessionId, 1, []*sessionv1.Message{b})
		if !res.Turns[2].Duplicate || res.Turns[2].Messages[0].Sequence != 1 {
			h.Fatalf("turn 2 (same id as turn 1) should be its duplicate: %+v", res.Turns[2])
		}
		if res.NextSequence != 2 || h.get(s.SessionId).MessageCount != 2 {
			h.Fatalf("next %d", res.NextSequence)
		}
	}},
	{"same id twice in one turn is INVALID_ARGUMENT", func(h *harness) {
		s := h.create()
		m := h.msg("x")
		res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(m, clone(m)[0])}})
		wantCode(h.T, res.Turns[0].Err, errs.InvalidArgumentCode)
		if n := len(h.messages(s.SessionId)); n != 0 {
			h.Fatalf("%d messages stored", n)
		}
	}},
	{"stale next sequence fails the command", func(h *harness) {
		s := h.create(h.msgs(2)...)
		e := h.entry("appended")
		h.fails(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 1,
			Turns: []persistence.Turn{{Messages: []*sessionv1.Message{h.msg("late")}, Audit: []*auditv1.AuditEntry{e}}}},
			errs.FailedPreconditionCode)
		if e.Position != 0 {
			h.Fatalf("audit entry of a failed command was assigned position %d", e.Position)
		}
		if got := h.get(s.SessionId); got.MessageCount != 2 {
			h.Fatalf("message_count %d after a failed append", got.MessageCount)
		}
		if n := len(h.scan()); n != 0 {
			h.Fatalf("%d audit entries stored", n)
		}
	}},
	{"next sequence beyond the end fails the command", func(h *harness) {
		s := h.create(h.msgs(2)...)
		h.fails(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 3,
			Turns: []persistence.Turn{turn(h.msg("gap"))}}, errs.FailedPreconditionCode)
		if got := h.get(s.SessionId); got.MessageCount != 2 {
			h.Fatalf("message_count %d", got.MessageCount)
		}
	}},
	{"missing session is NOT_FOUND", func(h *harness) {
		h.fails(&persistence.AppendMessages{SessionID: ids.New(), Turns: []persistence.Turn{turn(h.msg("x"))}},
			errs.NotFoundCode)
	}},
	{"message ids are per session", func(h *harness) {
		a, b := h.create(), h.create()
		m := h.msg("shared id")
		h.ok(&persistence.AppendMessages{SessionID: a.SessionId, Turns: []persistence.Turn{turn(m)}})
		res := h.appendOK(&persistence.AppendMessages{SessionID: b.SessionId, Turns: []persistence.Turn{turn(clone(m)...)}})
		if res.Turns[0].Duplicate || res.Turns[0].Err != nil {
			h.Fatalf("same id in another session: %+v", res.Turns[0])
		}
	}},
	{"turn audit entries are stored with the turn", func(h *harness) {
		s := h.create()
		e1, e2 := h.entry("appended"), h.entry("appended")
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{
			{Messages: h.msgs(1), Audit: []*auditv1.AuditEntry{e1}},
			{Messages: h.msgs(1), Audit: []*auditv1.AuditEntry{e2}},
		}})
		all := h.verifyChain()
		if len(all) != 2 || all[0].EventId != e1.EventId || all[1].EventId != e2.EventId {
			h.Fatalf("audit entries %v", all)
		}
	}},
}
