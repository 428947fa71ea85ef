package storetest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// A shared scope's keys are its namespace's (issue 28): a scope filled to
// the quota of keys per shared scope refuses the turn that would add one
// more, FAILED_PRECONDITION naming the scope's namespace, and stores
// nothing of that turn; the other turns of the batch, writing the scope
// of another namespace or the full scope without adding keys, are stored.
var scopeQuotaCases = []testCase{
	{"a full shared scope is its namespace's quota error, and nobody else's", func(h *harness) {
		s := h.create()
		full := set()
		for i := range persistence.MaxStateKeys {
			full.SetJson[fmt.Sprintf("k%04d", i)] = `1`
		}
		h.ok(&persistence.AppendMessages{SessionID: s.SessionId, UpdatedAt: h.now(),
			Turns: []persistence.Turn{{Messages: h.msgs(1), Scopes: scope("app:my%20app", full)}}})

		over := persistence.Turn{Messages: h.msgs(1), State: set("a", `1`), Scopes: scope("app:my%20app", set("one-more", `1`))}
		other := persistence.Turn{Messages: h.msgs(1), Scopes: scope("app:other", set("k", `2`))}
		rewrite := persistence.Turn{Messages: h.msgs(1), Scopes: scope("app:my%20app", set("k0000", `3`))}
		res := appended(h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 1, UpdatedAt: h.now(),
			Turns: []persistence.Turn{over, other, rewrite}}))
		err := res.Turns[0].Err
		wantCode(h.T, err, errs.FailedPreconditionCode)
		if msg := errs.From(err).Msg; !strings.Contains(msg, `namespace "my app"`) || !strings.Contains(msg, "app:my%20app") {
			h.Fatalf("the quota error does not name the namespace and the scope: %q", msg)
		}
		if res.Turns[1].Err != nil || res.Turns[2].Err != nil || res.NextSequence != 3 {
			h.Fatalf("the other turns: %v, %v, next %d", res.Turns[1].Err, res.Turns[2].Err, res.NextSequence)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(h.scopeState("app:my%20app")), &m); err != nil {
			h.Fatal(err)
		}
		if len(m) != persistence.MaxStateKeys || m["one-more"] != nil || string(m["k0000"]) != `3` {
			h.Fatalf("the full scope holds %d keys (one-more: %s, k0000: %s)", len(m), m["one-more"], m["k0000"])
		}
		wantJSON(h, "other scope", h.scopeState("app:other"), `{"k":2}`)
		st, _ := h.state(s.SessionId)
		wantJSON(h, "state", st, `{}`)
	}},
}
