package storetest

import (
	"context"
	"maps"
	"strings"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence"
)

// UsageCounter is implemented by every store: its running totals of the
// bytes each namespace stores, and a recount of them from its tables.
type UsageCounter interface {
	NamespaceBytes(ctx context.Context) (running, recount map[string]int64, err error)
}

// usage checks that the store's running totals equal a recount from its
// tables, and returns them.
func (h *harness) usage() map[string]int64 {
	h.Helper()
	c, ok := h.store.(UsageCounter)
	if !ok {
		h.Fatalf("%T does not count stored bytes (storetest.UsageCounter)", h.store)
	}
	running, recount, err := c.NamespaceBytes(h.ctx)
	if err != nil {
		h.Fatalf("NamespaceBytes: %v", err)
	}
	if !maps.Equal(running, recount) {
		h.Fatalf("running totals of stored bytes %v, a recount from the tables %v", running, recount)
	}
	return running
}

// wantBytes checks the totals (running = recount) and namespace ns's.
func (h *harness) wantBytes(what, ns string, want int64) {
	h.Helper()
	if got := h.usage()[ns]; got != want {
		h.Fatalf("%s: namespace %q stores %d bytes, want %d", what, ns, got, want)
	}
}

// sized is a message of n bytes of content (and "{}" of metadata).
func (h *harness) sized(n int) *sessionv1.Message { return h.msg(strings.Repeat("x", n)) }

// Stored bytes per namespace (issue 28): every write moves its
// namespace's running total by exactly what it stores or removes, in its
// own transaction, and a write past the quota is refused.
var usageCases = []testCase{
	{"the running totals equal a recount after every kind of write and delete", func(h *harness) {
		h.usage()
		// An import: state, messages, snapshot, a scope of its own.
		c := h.inNamespace("u1", h.sized(10), h.sized(20))
		c.State = `{"a":1}`
		c.Snapshot = &sessionv1.Snapshot{Sequence: 1, Data: []byte("snap"), CreatedAt: h.ts()}
		c.Scopes = scope("app:u1", set("k", `"v"`))
		h.ok(c)
		id := c.Session.SessionId
		// 7 state + 2×2 metadata + 30 content + 4 snapshot + 9 scope.
		h.wantBytes("after an import", "u1", 7+4+30+4+int64(len(h.scopeState("app:u1"))))
		other := h.inNamespace("u2")
		h.ok(other)
		// Appends of two sessions in one batch, with deltas and a
		// keyed item, then a kept one (it stores nothing new).
		k := h.keyed("k1", "note")
		res := h.apply(
			&persistence.AppendMessages{SessionID: id, NextSequence: 2, State: c.State, UpdatedAt: h.now(), Turns: []persistence.Turn{
				{Messages: []*sessionv1.Message{h.sized(5)}, State: set("b", `2`), Scopes: scope("user:u1/al", set("x", `1`))},
				turn(k)}},
			&persistence.AppendMessages{SessionID: other.Session.SessionId, UpdatedAt: h.now(), Turns: []persistence.Turn{turn(h.sized(7))}})
		for _, r := range res {
			if r.Err != nil {
				h.Fatal(r.Err)
			}
		}
		h.usage()
		st, _ := h.state(id)
		h.ok(&persistence.AppendMessages{SessionID: id, NextSequence: 4, State: st, UpdatedAt: h.now(),
			Turns: []persistence.Turn{keepTurn(h.keyed("k1", "note"))}})
		// A retried turn, and a batch with a failing command.
		dup := h.sized(3)
		h.appendOK(&persistence.AppendMessages{SessionID: id, NextSequence: 4, State: st, UpdatedAt: h.now(), Turns: []persistence.Turn{turn(dup)}})
		before := h.usage()
		res = h.apply(
			&persistence.AppendMessages{SessionID: id, NextSequence: 5, State: st, UpdatedAt: h.now(), Turns: []persistence.Turn{turn(clone(dup)...)}},
			&persistence.AppendMessages{SessionID: id, NextSequence: 2, State: st, UpdatedAt: h.now(), Turns: []persistence.Turn{turn(h.sized(9))}})
		if res[1].Err == nil {
			h.Fatalf("an append at a stale sequence committed")
		}
		if after := h.usage(); !maps.Equal(before, after) {
			h.Fatalf("a retried turn and a failed append moved the totals: %v, then %v", before, after)
		}
		// Replacement, truncation, snapshots, scopes without a session.
		h.ok(h.replace(id, 4, 5, h.sized(11), h.sized(12)))
		h.usage()
		h.ok(&persistence.TruncateSession{SessionID: id, Through: 1, UpdatedAt: h.now()})
		h.usage()
		h.ok(&persistence.PutSnapshot{SessionID: id, Snapshot: &sessionv1.Snapshot{Sequence: 3, Data: []byte("bigger snapshot"), CreatedAt: h.ts()}})
		h.usage()
		h.ok(&persistence.PutSnapshot{SessionID: id, DeleteThrough: 3})
		h.usage()
		h.ok(h.updateScopes("", false, scope("app:u1", set("more", `"value"`))...))
		// Two deltas of one scope in one command: the scope stores the last.
		h.ok(h.updateScopes("", false, append(scope("app:u1", set("p", `1`)), scope("app:u1", set("q", `"two"`))...)...))
		h.usage()
		h.ok(h.updateScopes("", false, scope("app:u1", &sessionv1.StateDelta{Delete: []string{"k", "more"}})...))
		h.usage()
		// Deletes: one session, then a group.
		h.ok(&persistence.DeleteSession{SessionID: id})
		h.usage()
		h.sessionKeyed("u2", "g/1", h.sized(40))
		h.sessionKeyed("u2", "g/2", h.sized(50))
		h.ok(h.deleteGroup("u2", "g/"))
		h.ok(&persistence.DeleteSession{SessionID: other.Session.SessionId})
		// A staged import removed in bounded steps.
		staged := h.inNamespace("u2", h.sized(1), h.sized(2), h.sized(3))
		staged.Session.State = persistence.SessionStateStaged
		h.ok(staged)
		for range 2 {
			h.ok(&persistence.DeleteSession{SessionID: staged.Session.SessionId, Limit: 2})
			h.usage()
		}
		h.wantBytes("after every session of u2 went", "u2", 0)
	}},
	{"a write past the quota of stored bytes is refused, stores nothing, and nobody else's is", func(h *harness) {
		h.store.SetQuotas(quotaMap{"small": {MaxBytes: 100}})
		s := h.inNamespace("small")
		h.ok(s)
		big := h.inNamespace("big")
		h.ok(big)
		id := s.Session.SessionId
		h.appendOK(&persistence.AppendMessages{SessionID: id, UpdatedAt: h.now(), Turns: []persistence.Turn{turn(h.sized(80))}})
		h.wantBytes("within the quota", "small", 2+82)
		// One batch: small's turn past the quota is refused alone; its
		// turn that fits, and big's append, are stored.
		res := h.apply(
			&persistence.AppendMessages{SessionID: id, NextSequence: 1, UpdatedAt: h.now(), Turns: []persistence.Turn{
				turn(h.sized(20)), turn(h.sized(10))}},
			&persistence.AppendMessages{SessionID: big.Session.SessionId, UpdatedAt: h.now(), Turns: []persistence.Turn{turn(h.sized(500))}})
		if res[0].Err != nil || res[1].Err != nil {
			h.Fatalf("the appends: %v, %v", res[0].Err, res[1].Err)
		}
		turns := appended(res[0]).Turns
		wantQuotaError(h, turns[0].Err, "small", "100 stored bytes")
		if turns[1].Err != nil {
			h.Fatalf("the turn that fits: %v", turns[1].Err)
		}
		if n := len(h.messages(id)); n != 2 {
			h.Fatalf("small holds %d messages, want 2", n)
		}
		h.wantBytes("after the refusal", "small", 2+82+12)
		h.wantBytes("the other namespace", "big", 2+502)
		// Every other kind of write that adds bytes is refused too.
		wantQuotaError(h, h.apply(h.inNamespace("small", h.sized(1)))[0].Err, "small", "stored bytes")
		wantQuotaError(h, h.apply(&persistence.PutSnapshot{SessionID: id,
			Snapshot: &sessionv1.Snapshot{Sequence: 1, Data: make([]byte, 10), CreatedAt: h.ts()}})[0].Err, "small", "stored bytes")
		wantQuotaError(h, h.apply(h.updateScopes("", false, scope("app:small", set("k", `"0123456789"`))...))[0].Err,
			"small", "stored bytes")
		h.wantBytes("after the refusals", "small", 2+82+12)
		// A delete frees bytes, then the write fits.
		h.ok(&persistence.TruncateSession{SessionID: id, Through: 0, UpdatedAt: h.now()})
		h.appendOK(&persistence.AppendMessages{SessionID: id, NextSequence: 2, UpdatedAt: h.now(), Turns: []persistence.Turn{turn(h.sized(20))}})
		// A raised quota applies from the next transaction on.
		h.store.SetQuotas(quotaMap{"small": {MaxBytes: 1000}})
		h.ok(h.inNamespace("small", h.sized(100)))
		h.usage()
	}},
	{"a retried turn is answered as stored even when the namespace is full", func(h *harness) {
		h.store.SetQuotas(quotaMap{"full": {MaxBytes: 50}})
		s := h.inNamespace("full")
		h.ok(s)
		m := h.sized(40)
		h.appendOK(&persistence.AppendMessages{SessionID: s.Session.SessionId, UpdatedAt: h.now(), Turns: []persistence.Turn{turn(m)}})
		got := h.appendOK(&persistence.AppendMessages{SessionID: s.Session.SessionId, NextSequence: 1, UpdatedAt: h.now(),
			Turns: []persistence.Turn{turn(clone(m)...)}})
		if tr := got.Turns[0]; tr.Err != nil || !tr.Duplicate {
			h.Fatalf("the retry: duplicate %v, %v", tr.Duplicate, tr.Err)
		}
		h.wantBytes("after the retry", "full", 2+42)
	}},
}
