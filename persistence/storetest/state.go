package storetest

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Session state, shared scopes, client names and times, and retention
// (issue 18).

func set(kv ...string) *sessionv1.StateDelta {
	d := &sessionv1.StateDelta{SetJson: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		d.SetJson[kv[i]] = kv[i+1]
	}
	return d
}

func scope(name string, d *sessionv1.StateDelta) []persistence.ScopeDelta {
	return []persistence.ScopeDelta{{Scope: name, Delta: d}}
}

// wantJSON compares JSON objects by value (stores may format them
// differently).
func wantJSON(h *harness, what, got, want string) {
	h.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		h.Fatalf("%s: %q is not JSON: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		h.Fatalf("%s: want %q is not JSON: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		h.Fatalf("%s: %s, want %s", what, got, want)
	}
}

func (h *harness) state(id string) (string, int64) {
	h.Helper()
	s, next, err := h.r.GetSessionState(h.ctx, id)
	if err != nil {
		h.Fatalf("GetSessionState(%s): %v", id, err)
	}
	return s, next
}

func (h *harness) scopeState(name string) string {
	h.Helper()
	sc, err := h.r.GetScopes(h.ctx, []string{name})
	if err != nil || len(sc) != 1 {
		h.Fatalf("GetScopes(%s): %v", name, err)
	}
	return sc[0].GetStateJson()
}

var stateCases = []testCase{
	{"deltas apply with their turns, in turn order, in pooled batches", func(h *harness) {
		a, b := h.create(), h.create()
		ca := &persistence.AppendMessages{SessionID: a.SessionId, UpdatedAt: h.now(), Turns: []persistence.Turn{
			{Messages: h.msgs(1), State: set("k", `1`, "x", `"a"`), Scopes: scope("app:x", set("n", `1`))},
			{Messages: h.msgs(1), State: &sessionv1.StateDelta{SetJson: map[string]string{"k": `{"deep":[1,2]}`}, Delete: []string{"x"}}},
		}}
		cb := &persistence.AppendMessages{SessionID: b.SessionId, UpdatedAt: h.now(), Turns: []persistence.Turn{
			{Messages: h.msgs(2), Scopes: scope("app:x", set("n", `2`, "m", `true`))},
		}}
		res := h.apply(ca, cb)
		for i, r := range res {
			if r.Err != nil {
				h.Fatalf("command %d: %v", i, r.Err)
			}
		}
		wantJSON(h, "result state", ca.ResultOf(res[0]).State, `{"k":{"deep":[1,2]}}`)
		if st := cb.ResultOf(res[1]).State; st != "" {
			h.Fatalf("a command without a session delta reports state %q", st)
		}
		st, next := h.state(a.SessionId)
		wantJSON(h, "stored state", st, `{"k":{"deep":[1,2]}}`)
		if next != 2 {
			h.Fatalf("next sequence %d with the state, want 2", next)
		}
		st, _ = h.state(b.SessionId)
		wantJSON(h, "untouched state", st, `{}`)
		wantJSON(h, "scope", h.scopeState("app:x"), `{"n":2,"m":true}`)
		wantJSON(h, "unwritten scope", h.scopeState("user:none"), `{}`)
	}},
	{"a retried turn does not apply its deltas again", func(h *harness) {
		s := h.create()
		ms := h.msgs(2)
		first := persistence.Turn{Messages: ms, State: set("c", `1`), Scopes: scope("s", set("c", `1`))}
		r := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, UpdatedAt: h.now(), Turns: []persistence.Turn{first}})
		// Someone else changes the scope, then the first turn is retried
		// (in a pooled batch, with a new turn behind it).
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, State: r.State, UpdatedAt: h.now(),
			Turns: []persistence.Turn{{Messages: h.msgs(1), State: set("c", `2`), Scopes: scope("s", set("c", `2`))}}})
		retry := persistence.Turn{Messages: clone(ms...), State: set("c", `1`), Scopes: scope("s", set("c", `1`))}
		st, _ := h.state(s.SessionId)
		res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 3, State: st, UpdatedAt: h.now(),
			Turns: []persistence.Turn{retry, {Messages: h.msgs(1), State: set("d", `4`)}}})
		if !res.Turns[0].Duplicate || res.Turns[1].Err != nil {
			h.Fatalf("retry: %+v / %v", res.Turns[0], res.Turns[1].Err)
		}
		st, next := h.state(s.SessionId)
		wantJSON(h, "state", st, `{"c":2,"d":4}`)
		wantJSON(h, "scope", h.scopeState("s"), `{"c":2}`)
		if next != 4 {
			h.Fatalf("next %d, want 4", next)
		}
	}},
	{"a delta past the size bound fails its turn and stores nothing of it", func(h *harness) {
		s := h.create()
		big := `"` + strings.Repeat("x", persistence.MaxStateBytes) + `"`
		bad := persistence.Turn{Messages: h.msgs(1), State: set("a", `1`), Scopes: scope("s", set("big", big))}
		good := persistence.Turn{Messages: h.msgs(1), State: set("b", `2`)}
		res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, UpdatedAt: h.now(), Turns: []persistence.Turn{bad, good}})
		wantCode(h.T, res.Turns[0].Err, errs.InvalidArgumentCode)
		if res.Turns[1].Err != nil || res.NextSequence != 1 {
			h.Fatalf("the good turn: %v, next %d", res.Turns[1].Err, res.NextSequence)
		}
		st, _ := h.state(s.SessionId)
		wantJSON(h, "state", st, `{"b":2}`)
		wantJSON(h, "scope", h.scopeState("s"), `{}`)
		if ms := h.messages(s.SessionId); len(ms) != 1 || ms[0].MessageId != good.Messages[0].MessageId {
			h.Fatalf("messages: %v", ms)
		}
	}},
	{"a turn without messages changes state alone", func(h *harness) {
		s := h.create(h.msgs(1)...)
		res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 1, UpdatedAt: h.now(),
			Turns: []persistence.Turn{{State: set("only", `"state"`)}}})
		if res.NextSequence != 1 || len(res.Turns[0].Messages) != 0 {
			h.Fatalf("state-only turn: next %d, %d messages", res.NextSequence, len(res.Turns[0].Messages))
		}
		st, next := h.state(s.SessionId)
		wantJSON(h, "state", st, `{"only":"state"}`)
		if next != 1 {
			h.Fatalf("next %d", next)
		}
		// A turn with neither is still refused.
		res = h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 1, Turns: []persistence.Turn{{}}})
		wantCode(h.T, res.Turns[0].Err, errs.InvalidArgumentCode)
	}},
	{"create stores the initial state, scopes, client key and expiry", func(h *harness) {
		exp := h.now().Add(time.Hour)
		s := h.session(func(s *sessionv1.Session) { s.ClientKey = "app/user/s1"; s.ExpiresAt = tsOf(exp) })
		h.ok(&persistence.CreateSession{Session: s, State: `{"a":1}`, Scopes: scope("user:app/user", set("u", `1`))})
		got := h.get(s.SessionId)
		if got.ClientKey != "app/user/s1" || !got.ExpiresAt.AsTime().Equal(exp) {
			h.Fatalf("session: %v", got)
		}
		st, _ := h.state(s.SessionId)
		wantJSON(h, "state", st, `{"a":1}`)
		wantJSON(h, "scope", h.scopeState("user:app/user"), `{"u":1}`)
		id, err := h.r.FindSession(h.ctx, "local", "app/user/s1")
		if err != nil || id != s.SessionId {
			h.Fatalf("FindSession: %q, %v", id, err)
		}
		if _, err := h.r.FindSession(h.ctx, "other", "app/user/s1"); errs.CodeOf(err) != errs.NotFoundCode {
			h.Fatalf("FindSession in another namespace: %v", err)
		}
		// The key is unique in its namespace, not across them.
		dup := h.session(func(d *sessionv1.Session) { d.ClientKey = "app/user/s1" })
		h.fails(&persistence.CreateSession{Session: dup}, errs.AlreadyExistsCode)
		other := h.session(func(d *sessionv1.Session) { d.ClientKey = "app/user/s1"; d.Namespace = "other" })
		h.ok(&persistence.CreateSession{Session: other})
		// Expiry is listed once passed.
		if ids, err := h.r.ListExpired(h.ctx, exp.Add(-time.Second), 10); err != nil || len(ids) != 0 {
			h.Fatalf("expired before its time: %v %v", ids, err)
		}
		if ids, err := h.r.ListExpired(h.ctx, exp, 10); err != nil || len(ids) != 1 || ids[0] != s.SessionId {
			h.Fatalf("expired: %v %v", ids, err)
		}
		h.ok(&persistence.UpdateSession{SessionID: s.SessionId, SetExpiry: true})
		if ids, err := h.r.ListExpired(h.ctx, exp, 10); err != nil || len(ids) != 0 {
			h.Fatalf("expired after clearing: %v %v", ids, err)
		}
	}},
	{"event times are stored, compared on retry, and filter reads", func(h *harness) {
		s := h.create()
		base := h.now()
		var ms []*sessionv1.Message
		for i := range 10 {
			m := h.msg("m")
			m.MessageId = "event" + string(rune('0'+i)) // a client's own ids
			m.EventTime = tsOf(base.Add(time.Duration(i) * time.Second))
			ms = append(ms, m)
		}
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, UpdatedAt: h.now(), Turns: []persistence.Turn{{Messages: ms}}})
		got := h.messages(s.SessionId)
		for i, m := range got {
			if !proto.Equal(m.EventTime, ms[i].EventTime) || m.MessageId != ms[i].MessageId {
				h.Fatalf("message %d: %v", i, m)
			}
		}
		retry := clone(ms[0])
		res := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 10, Turns: []persistence.Turn{{Messages: retry}}})
		if !res.Turns[0].Duplicate {
			h.Fatalf("retry by client id: %+v", res.Turns[0])
		}
		moved := clone(ms[0])
		moved[0].EventTime = tsOf(base.Add(time.Hour))
		res = h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 10, Turns: []persistence.Turn{{Messages: moved}}})
		wantCode(h.T, res.Turns[0].Err, errs.AlreadyExistsCode)

		filter := func(f persistence.MessageFilter) []int64 {
			h.Helper()
			f.SessionID = s.SessionId
			out, err := h.r.ListMessagesWhere(h.ctx, f)
			if err != nil {
				h.Fatalf("ListMessagesWhere(%+v): %v", f, err)
			}
			var seqs []int64
			for _, m := range out {
				seqs = append(seqs, m.Sequence)
			}
			return seqs
		}
		at := func(i int) int64 { return base.Add(time.Duration(i) * time.Second).UnixNano() }
		for _, c := range []struct {
			f    persistence.MessageFilter
			want []int64
		}{
			{persistence.MessageFilter{After: at(6)}, []int64{7, 8, 9}},
			{persistence.MessageFilter{Before: at(2)}, []int64{0, 1}},
			{persistence.MessageFilter{After: at(2), Before: at(6)}, []int64{3, 4, 5}},
			{persistence.MessageFilter{Last: 3}, []int64{7, 8, 9}},
			{persistence.MessageFilter{Last: 2, Before: at(5)}, []int64{3, 4}},
			{persistence.MessageFilter{Last: 20, From: 8}, []int64{8, 9}},
		} {
			if got := filter(c.f); !reflect.DeepEqual(got, c.want) {
				h.Fatalf("filter %+v: %v, want %v", c.f, got, c.want)
			}
		}
	}},
	{"truncation removes a prefix in chunks and keeps the next sequence", func(h *harness) {
		s := h.create(h.msgs(10)...)
		cmd := &persistence.TruncateSession{SessionID: s.SessionId, Through: 6, Limit: 4, UpdatedAt: h.now()}
		if n := cmd.ResultOf(h.ok(cmd)).Removed; n != 4 {
			h.Fatalf("first chunk removed %d, want 4", n)
		}
		if got := h.get(s.SessionId); got.FirstSequence != 4 || got.MessageCount != 10 {
			h.Fatalf("after a chunk: first %d, next %d", got.FirstSequence, got.MessageCount)
		}
		cmd = &persistence.TruncateSession{SessionID: s.SessionId, Through: 6, Limit: 4, UpdatedAt: h.now()}
		if n := cmd.ResultOf(h.ok(cmd)).Removed; n != 3 {
			h.Fatalf("second chunk removed %d, want 3", n)
		}
		ms := h.messages(s.SessionId)
		if len(ms) != 3 || ms[0].Sequence != 7 {
			h.Fatalf("left: %v", ms)
		}
		got := h.get(s.SessionId)
		if got.FirstSequence != 7 || got.MessageCount != 10 {
			h.Fatalf("after truncation: first %d, next %d", got.FirstSequence, got.MessageCount)
		}
		// The next sequence is unchanged: an append continues at 10.
		r := h.appendOK(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 10, Turns: []persistence.Turn{turn(h.msg("x"))}})
		if r.Turns[0].Messages[0].Sequence != 10 {
			h.Fatalf("append after truncation at %d", r.Turns[0].Messages[0].Sequence)
		}
		// Truncating past everything keeps next; a stale append is still refused.
		h.ok(&persistence.TruncateSession{SessionID: s.SessionId, Through: 100, UpdatedAt: h.now()})
		if got := h.get(s.SessionId); got.FirstSequence != 11 || got.MessageCount != 11 || len(h.messages(s.SessionId)) != 0 {
			h.Fatalf("after truncating all: %v", got)
		}
		h.fails(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 0, Turns: []persistence.Turn{turn(h.msg("y"))}},
			errs.FailedPreconditionCode)
		h.fails(&persistence.TruncateSession{SessionID: h.session().SessionId, Through: 1}, errs.NotFoundCode)
	}},
	{"the snapshot slot holds the latest snapshot and goes with its session", func(h *harness) {
		s := h.create(h.msgs(3)...)
		if snap, err := h.r.GetSnapshot(h.ctx, s.SessionId); err != nil || snap != nil {
			h.Fatalf("empty slot: %v %v", snap, err)
		}
		h.ok(&persistence.PutSnapshot{SessionID: s.SessionId, Snapshot: &sessionv1.Snapshot{Sequence: 1, Data: []byte{1, 2}, CreatedAt: h.ts()}})
		second := &sessionv1.Snapshot{Sequence: 2, Data: []byte{3, 0, 4}, CreatedAt: h.ts()}
		h.ok(&persistence.PutSnapshot{SessionID: s.SessionId, Snapshot: second})
		snap, err := h.r.GetSnapshot(h.ctx, s.SessionId)
		if err != nil || !proto.Equal(snap, second) {
			h.Fatalf("snapshot: %v (%v), want %v", snap, err, second)
		}
		if cmd := (&persistence.PutSnapshot{SessionID: s.SessionId, DeleteThrough: 1}); cmd.ResultOf(h.ok(cmd)).Removed != 0 {
			h.Fatalf("deleted a snapshot past the bound")
		}
		if cmd := (&persistence.PutSnapshot{SessionID: s.SessionId, DeleteThrough: 2}); cmd.ResultOf(h.ok(cmd)).Removed != 1 {
			h.Fatalf("did not delete the snapshot")
		}
		h.ok(&persistence.PutSnapshot{SessionID: s.SessionId, Snapshot: second})
		h.ok(&persistence.DeleteSession{SessionID: s.SessionId})
		if snap, err := h.r.GetSnapshot(h.ctx, s.SessionId); err != nil || snap != nil {
			h.Fatalf("snapshot after delete: %v %v", snap, err)
		}
		h.fails(&persistence.PutSnapshot{SessionID: s.SessionId, Snapshot: second}, errs.NotFoundCode)
	}},
}

func tsOf(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }
