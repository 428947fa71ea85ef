package audit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/jsonobj"
)

// FuzzNewEntry: an entry is refused as INVALID_ARGUMENT or accepted with a
// ULID, a registered event type and details that are a JSON object in which
// no secret-named key keeps its value.
func FuzzNewEntry(f *testing.F) {
	f.Add("config_changed", `{"key":"db","password":"hunter2","nested":{"API_Key":"k","ok":1}}`)
	f.Add("auth_failure", "")
	f.Add("nope", "{}")
	f.Add("session_created", `{"a":[{"token":"t"}]}`)
	f.Add("plan_applied", "[1,2]")
	f.Add("config_changed", `{"\u0070assword":"hunter2","x":{"\u0063ookie":["c"]}}`)
	f.Fuzz(func(t *testing.T, eventType, details string) {
		e, err := audit.NewEntry(&auditv1.RecordRequest{EventType: eventType, DetailsJson: details}, time.Now())
		if err != nil {
			if !errors.Is(err, errs.ErrInvalidArgument) {
				t.Fatalf("NewEntry returned %v; want INVALID_ARGUMENT", err)
			}
			return
		}
		if ids.Check("event_id", e.EventId) != nil || !audit.KnownEventType(e.EventType) {
			t.Fatalf("accepted entry %v", e)
		}
		m, err := jsonobj.Decode(e.DetailsJson)
		if err != nil {
			t.Fatalf("details %q are not an object: %v", e.DetailsJson, err)
		}
		assertMasked(t, m)
	})
}

func assertMasked(t *testing.T, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if audit.IsSecretKey(k) {
				if s, ok := val.(string); !ok || s != audit.Masked {
					if !(strings.TrimSpace(k) == "") {
						t.Fatalf("secret key %q kept value %v", k, val)
					}
				}
				continue
			}
			assertMasked(t, val)
		}
	case []any:
		for _, e := range x {
			assertMasked(t, e)
		}
	}
}
