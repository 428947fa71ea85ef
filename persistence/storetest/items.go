package storetest

import (
	"fmt"
	"strings"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

// keyed is a message with an item key and a kind.
func (h *harness) keyed(key, kind string) *sessionv1.Message {
	m := h.msg("item " + key)
	m.ItemKey, m.Kind = key, kind
	return m
}

// keepTurn is a turn whose messages all keep a stored message of their key.
func keepTurn(ms ...*sessionv1.Message) persistence.Turn {
	t := turn(ms...)
	t.KeepStored = make([]bool, len(ms))
	for i := range t.KeepStored {
		t.KeepStored[i] = true
	}
	return t
}

func (h *harness) item(sessionID, key string) *sessionv1.Message {
	h.Helper()
	m, err := h.r.GetItem(h.ctx, sessionID, key)
	if err != nil {
		h.Fatalf("GetItem(%s): %v", key, err)
	}
	return m
}

// items lists with f and returns the page's item keys (content for
// unkeyed messages) and whether more follow.
func (h *harness) items(f persistence.ItemFilter) ([]string, bool) {
	h.Helper()
	page, more, err := h.r.ListItems(h.ctx, f)
	if err != nil {
		h.Fatalf("ListItems(%+v): %v", f, err)
	}
	out := make([]string, len(page))
	for i, m := range page {
		if out[i] = m.ItemKey; out[i] == "" {
			out[i] = m.Content
		}
	}
	return out, more
}

func wantKeys(h *harness, got []string, more bool, want string, wantMore bool) {
	h.Helper()
	if strings.Join(got, ",") != want || more != wantMore {
		h.Fatalf("page %v (more %v), want %s (more %v)", got, more, want, wantMore)
	}
}

var itemCases = []testCase{
	{"a keyed message is stored with its key and kind and read by key", func(h *harness) {
		s := h.create()
		m := h.keyed("cp:1", "checkpoint")
		res := h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(h.msg("plain"), m)}})
		checkTurn(h, res.Turns[0], s.SessionId, 0, []*sessionv1.Message{res.Turns[0].Messages[0], m})
		got := h.item(s.SessionId, "cp:1")
		if got.MessageId != m.MessageId || got.Sequence != 1 || got.Kind != "checkpoint" || got.ItemKey != "cp:1" {
			h.Fatalf("GetItem: %v", got)
		}
		if ms := h.messages(s.SessionId); ms[1].ItemKey != "cp:1" || ms[1].Kind != "checkpoint" || ms[0].ItemKey != "" {
			h.Fatalf("ListMessages does not carry the key: %v", ms)
		}
		_, err := h.r.GetItem(h.ctx, s.SessionId, "cp:2")
		wantCode(h.T, err, errs.NotFoundCode)
		_, err = h.r.GetItem(h.ctx, s.SessionId, "")
		wantCode(h.T, err, errs.NotFoundCode)
	}},
	{"a stored key fails the turn naming the key and stores nothing of it", func(h *harness) {
		s := h.create()
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(h.keyed("k", ""))}})
		res := h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 1,
			Turns: []persistence.Turn{turn(h.msg("new"), h.keyed("k", "")), turn(h.msg("next"))}})
		wantCode(h.T, res.Turns[0].Err, errs.AlreadyExistsCode)
		if !strings.Contains(res.Turns[0].Err.Error(), `"k"`) {
			h.Fatalf("the error does not name the key: %v", res.Turns[0].Err)
		}
		if res.Turns[1].Err != nil || res.Turns[1].Messages[0].Sequence != 1 || res.NextSequence != 2 {
			h.Fatalf("the next turn: %+v, next %d", res.Turns[1], res.NextSequence)
		}
		if n := len(h.messages(s.SessionId)); n != 2 {
			h.Fatalf("%d messages stored, want 2", n)
		}
	}},
	{"keep-stored keeps the stored message, consumes no sequence, and the rest stays dense", func(h *harness) {
		s := h.create()
		orig := h.keyed("w:1", "write")
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(orig)}})
		a, again, b := h.keyed("w:0", "write"), h.keyed("w:1", "write"), h.keyed("w:2", "write")
		t := keepTurn(a, again, b)
		for range t.Messages {
			t.Audit = append(t.Audit, h.entries("message_appended", s.SessionId)...)
		}
		res := h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 1, UpdatedAt: h.now(),
			Turns: []persistence.Turn{t, turn(h.msg("after"))}})
		tr := res.Turns[0]
		if tr.Err != nil || tr.Duplicate || !tr.IsKept(1) || tr.IsKept(0) || tr.IsKept(2) {
			h.Fatalf("turn: %+v", tr)
		}
		if !proto.Equal(tr.Messages[1], h.item(s.SessionId, "w:1")) || tr.Messages[1].MessageId != orig.MessageId {
			h.Fatalf("kept message %v, want the stored %v", tr.Messages[1], orig)
		}
		if tr.Messages[0].Sequence != 1 || tr.Messages[2].Sequence != 2 || res.Turns[1].Messages[0].Sequence != 3 || res.NextSequence != 4 {
			h.Fatalf("sequences %d %d %d, next %d", tr.Messages[0].Sequence, tr.Messages[2].Sequence,
				res.Turns[1].Messages[0].Sequence, res.NextSequence)
		}
		ms := h.messages(s.SessionId)
		for i, m := range ms {
			if m.Sequence != int64(i) {
				h.Fatalf("stored sequence %d at %d", m.Sequence, i)
			}
		}
		if len(ms) != 4 || h.get(s.SessionId).MessageCount != 4 {
			h.Fatalf("%d messages stored, want 4", len(ms))
		}
		// The kept message's audit entry went with it.
		if got := h.scan(); len(got) != 2 || got[0].EventId != t.Audit[0].EventId || got[1].EventId != t.Audit[2].EventId {
			h.Fatalf("%d audit entries stored, want the inserted messages' 2", len(got))
		}
	}},
	{"a turn kept whole stores nothing", func(h *harness) {
		s := h.create()
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(h.keyed("a", ""), h.keyed("b", ""))}})
		before := h.get(s.SessionId)
		res := h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, UpdatedAt: h.now(),
			Turns: []persistence.Turn{keepTurn(h.keyed("b", ""), h.keyed("a", ""))}})
		tr := res.Turns[0]
		if tr.Err != nil || !tr.IsKept(0) || !tr.IsKept(1) || tr.Messages[0].Sequence != 1 || tr.Messages[1].Sequence != 0 || res.NextSequence != 2 {
			h.Fatalf("turn %+v, next %d", tr, res.NextSequence)
		}
		if after := h.get(s.SessionId); after.MessageCount != 2 || !proto.Equal(after.UpdatedAt, before.UpdatedAt) {
			h.Fatalf("session changed: %v", after)
		}
	}},
	{"a retry with the same ids is a duplicate, kept messages kept again", func(h *harness) {
		s := h.create()
		stored := h.keyed("x", "")
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(stored)}})
		a, b := h.keyed("y", "k"), h.keyed("x", "")
		first := h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 1, Turns: []persistence.Turn{keepTurn(a, b)}})
		for _, t := range []persistence.Turn{keepTurn(clone(a, b)...), turn(clone(a)...)} {
			res := h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, Turns: []persistence.Turn{t}})
			tr := res.Turns[0]
			if tr.Err != nil || !tr.Duplicate || res.NextSequence != 2 || !proto.Equal(tr.Messages[0], first.Turns[0].Messages[0]) {
				h.Fatalf("retry: %+v, next %d", tr, res.NextSequence)
			}
			if len(t.Messages) == 2 && (!tr.IsKept(1) || tr.Messages[1].MessageId != stored.MessageId) {
				h.Fatalf("retry's kept message: %+v", tr)
			}
		}
		// The same id with another key is no retry.
		c := clone(a)[0]
		c.ItemKey = "z"
		res := h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, Turns: []persistence.Turn{turn(c)}})
		wantCode(h.T, res.Turns[0].Err, errs.AlreadyExistsCode)
	}},
	{"bad keys and kinds and a key twice in a turn are refused", func(h *harness) {
		s := h.create()
		for _, t := range []persistence.Turn{
			turn(h.keyed("k", ""), h.keyed("k", "")),
			turn(h.keyed(strings.Repeat("k", 257), "")),
			turn(h.keyed("\xff", "")),
			turn(h.keyed("k", "tab\there")),
			turn(h.keyed("k", strings.Repeat("a", 65))),
		} {
			res := h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{t}})
			wantCode(h.T, res.Turns[0].Err, errs.InvalidArgumentCode)
		}
		if n := len(h.messages(s.SessionId)); n != 0 {
			h.Fatalf("%d messages stored", n)
		}
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(h.keyed(strings.Repeat("é", 128), strings.Repeat("~", 64)))}})
	}},
	{"keys resolve across the commands of one batch", func(h *harness) {
		s := h.create()
		first, second := h.keyed("k", ""), h.keyed("k", "")
		res := h.apply(
			&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(first)}},
			&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 1, Turns: []persistence.Turn{keepTurn(second), turn(h.msg("x"))}},
			&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, Turns: []persistence.Turn{turn(h.keyed("k", ""))}},
		)
		if res[0].Err != nil || res[1].Err != nil || res[2].Err != nil {
			h.Fatalf("results: %v %v %v", res[0].Err, res[1].Err, res[2].Err)
		}
		if tr := res[1].Turns[0]; !tr.IsKept(0) || tr.Messages[0].MessageId != first.MessageId || res[1].NextSequence != 2 {
			h.Fatalf("second command: %+v next %d", tr, res[1].NextSequence)
		}
		wantCode(h.T, res[2].Turns[0].Err, errs.AlreadyExistsCode)
		if n := len(h.messages(s.SessionId)); n != 2 {
			h.Fatalf("%d messages stored, want 2", n)
		}
	}},
	{"a blind append folded into an activation honours keys", func(h *harness) {
		s := h.sessionAt(h.keyed("k", ""))
		res := h.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId,
			Then: &persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{keepTurn(h.keyed("k", ""), h.keyed("j", ""))}}})
		tr := res.Turns[0]
		if tr.Err != nil || !tr.IsKept(0) || tr.Messages[0].Sequence != 0 || tr.Messages[1].Sequence != 1 || res.NextSequence != 2 {
			h.Fatalf("blind append: %+v next %d", tr, res.NextSequence)
		}
		res = h.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: s.SessionId,
			Then: &persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{turn(h.keyed("j", ""))}}})
		wantCode(h.T, res.Turns[0].Err, errs.AlreadyExistsCode)
	}},
	{"an import carries keys and refuses a key twice", func(h *harness) {
		s := h.create(h.keyed("a", "t"), h.msg("plain"), h.keyed("b", "t"))
		if m := h.item(s.SessionId, "b"); m.Sequence != 2 || m.Kind != "t" {
			h.Fatalf("imported item: %v", m)
		}
		h.fails(&persistence.CreateSession{Session: h.session(), Messages: []*sessionv1.Message{h.keyed("a", ""), h.keyed("a", "")}},
			errs.InvalidArgumentCode)
	}},
	{"truncation frees the removed messages' keys", func(h *harness) {
		s := h.create(h.keyed("a", ""), h.keyed("b", ""))
		h.ok(&persistence.TruncateSession{SessionID: s.SessionId, Through: 0, UpdatedAt: h.now()})
		_, err := h.r.GetItem(h.ctx, s.SessionId, "a")
		wantCode(h.T, err, errs.NotFoundCode)
		res := h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, Turns: []persistence.Turn{turn(h.keyed("a", ""))}})
		if res.Turns[0].Err != nil || h.item(s.SessionId, "a").Sequence != 2 {
			h.Fatalf("re-used key: %+v", res.Turns[0])
		}
	}},
	{"list items by kind, key prefix, order, limit and cursor", func(h *harness) {
		s := h.create()
		var t persistence.Turn
		for i := 0; i < 6; i++ {
			kind := "cp"
			if i%2 == 1 {
				kind = "w"
			}
			t.Messages = append(t.Messages, h.keyed(fmt.Sprintf("%s/%d", kind, i), kind))
		}
		t.Messages = append(t.Messages, h.msg("unkeyed"), h.keyed("cp\U0010ffff", ""), h.keyed("cq", ""))
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{t}})
		id := s.SessionId
		got, more := h.items(persistence.ItemFilter{SessionID: id, Kind: "cp"})
		wantKeys(h, got, more, "cp/0,cp/2,cp/4", false)
		got, more = h.items(persistence.ItemFilter{SessionID: id, Kind: "w", NewestFirst: true, Limit: 2})
		wantKeys(h, got, more, "w/5,w/3", true)
		got, more = h.items(persistence.ItemFilter{SessionID: id, Kind: "w", NewestFirst: true, Limit: 2, HasCursor: true, Cursor: 3})
		wantKeys(h, got, more, "w/1", false)
		got, more = h.items(persistence.ItemFilter{SessionID: id, KeyPrefix: "cp"})
		wantKeys(h, got, more, "cp/0,cp/2,cp/4,cp\U0010ffff", false)
		got, more = h.items(persistence.ItemFilter{SessionID: id, KeyPrefix: "cp/", Kind: "cp", Limit: 1, HasCursor: true, Cursor: 1})
		wantKeys(h, got, more, "cp/2", true)
		got, more = h.items(persistence.ItemFilter{SessionID: id, KeyPrefix: "\U0010ffff"})
		wantKeys(h, got, more, "", false)
		got, more = h.items(persistence.ItemFilter{SessionID: id, NewestFirst: true, Limit: 4})
		wantKeys(h, got, more, "cq,cp\U0010ffff,unkeyed,w/5", true)
		got, more = h.items(persistence.ItemFilter{SessionID: id, HasCursor: true, Cursor: 7})
		wantKeys(h, got, more, "cp\U0010ffff,cq", false)
		got, more = h.items(persistence.ItemFilter{SessionID: "01J0000000000000000000000X"})
		wantKeys(h, got, more, "", false)
	}},
	{"a page of items stops at the byte cap", func(h *harness) {
		s := h.create()
		big := strings.Repeat("x", persistence.MaxPageBytes/2)
		var t persistence.Turn
		for i := 0; i < 3; i++ {
			m := h.keyed(fmt.Sprintf("k%d", i), "big")
			m.Content = big
			t.Messages = append(t.Messages, m)
		}
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{t}})
		page, more, err := h.r.ListItems(h.ctx, persistence.ItemFilter{SessionID: s.SessionId, Kind: "big", NewestFirst: true})
		if err != nil || len(page) != 1 || !more || page[0].ItemKey != "k2" || page[0].Content != big {
			h.Fatalf("page of %d (more %v): %v", len(page), more, err)
		}
	}},
}
