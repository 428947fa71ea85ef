package session

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/lifecycle"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

// TestNewEntryDetailsAsNewEntryWouldStore: the entries a session builds
// store the details that audit.NewEntry (normalize, then mask) would,
// whether newEntry skips that pass (scalar values, no secret key) or not.
func TestNewEntryDetailsAsNewEntryWouldStore(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		details map[string]any
		own     bool
	}{
		{map[string]any{"namespace": "ns <&>", "automation": "\u2028x"}, true},
		{map[string]any{"through_sequence": int64(7), "role": "user", "cost": 0.25, "ok": true, "n": 3}, true},
		{nil, true},
		{map[string]any{"api_key": "sk-1", "namespace": "n"}, false},
		{map[string]any{"nested": map[string]any{"password": "p"}}, false},
	} {
		if got := ownDetails(tc.details); got != tc.own {
			t.Errorf("ownDetails(%v) = %v, want %v", tc.details, got, tc.own)
		}
		e, err := newEntry(audit.EventSessionCreated, "01J00000000000000000000000", "a", "", tc.details, now)
		if err != nil {
			t.Fatal(err)
		}
		dj := "{}"
		if len(tc.details) > 0 {
			b, _ := json.Marshal(tc.details)
			dj = string(b)
		}
		want, err := audit.NewEntry(&auditv1.RecordRequest{EventType: audit.EventSessionCreated,
			SessionId: "01J00000000000000000000000", ActorName: "a", DetailsJson: dj}, now)
		if err != nil {
			t.Fatal(err)
		}
		if e.DetailsJson != want.DetailsJson {
			t.Errorf("details %v stored as %s, NewEntry stores %s", tc.details, e.DetailsJson, want.DetailsJson)
		}
	}
}

// TestCreatedEntryAsTheMapGave: the session_created entry's details are
// the text the map of its two fields marshaled to, masked as NewEntry
// would (nothing to mask), for strings that encoding/json escapes too.
func TestCreatedEntryAsTheMapGave(t *testing.T) {
	now := time.Now()
	for _, c := range []*sessionv1.CreateSessionRequest{
		{ActorName: "a"},
		{ActorName: "a", Namespace: "ns <&> \"q\"", Automation: "\u2028 ünï"},
	} {
		e, err := createdEntry(&lifecycle.Request{Principal: "alice"}, "01J00000000000000000000000", c, now)
		if err != nil {
			t.Fatal(err)
		}
		want, err := newEntry(audit.EventSessionCreated, "01J00000000000000000000000", c.ActorName, "",
			map[string]any{"namespace": c.Namespace, "automation": c.Automation}, now)
		if err != nil {
			t.Fatal(err)
		}
		if e.DetailsJson != want.DetailsJson || e.EventType != want.EventType || e.SessionId != want.SessionId ||
			e.ActorName != want.ActorName || e.PlanId != "" {
			t.Errorf("created entry %v, want as %v", e, want)
		}
		if e.Principal != "alice" || e.Namespace != c.Namespace {
			t.Errorf("created entry names principal %q namespace %q; want alice, %q", e.Principal, e.Namespace, c.Namespace)
		}
	}
}
