package audit_test

import (
	"encoding/json"
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

func TestNewEntryAssignsIdentity(t *testing.T) {
	now := time.Date(2026, 4, 10, 16, 54, 59, 123456789, time.UTC)
	e, err := audit.NewEntry(&auditv1.RecordRequest{
		EventType: audit.EventPlanApplied, PlanId: "p1", ProjectName: "proj", ActorName: "a", UserIdentity: "u",
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := ids.Check("event_id", e.EventId); err != nil {
		t.Fatalf("event_id is not a ULID: %v", err)
	}
	if !e.CreatedAt.AsTime().Equal(now) {
		t.Fatalf("created_at = %v, want %v", e.CreatedAt.AsTime(), now)
	}
	if e.DetailsJson != "{}" {
		t.Fatalf("empty details became %q, want {}", e.DetailsJson)
	}
	if e.Position != 0 || e.Hash != "" || e.PrevHash != "" {
		t.Fatalf("commit fields set before commit: %v", e)
	}
	e2, _ := audit.NewEntry(&auditv1.RecordRequest{EventType: audit.EventPlanApplied}, now)
	if e2.EventId == e.EventId {
		t.Fatal("two entries got the same event_id")
	}
}

func TestNewEntryTypedErrors(t *testing.T) {
	cases := map[string]*auditv1.RecordRequest{
		"nil request":         nil,
		"empty event type":    {},
		"unknown event type":  {EventType: "plan.created"},
		"case differs":        {EventType: "PLAN_APPLIED"},
		"details array":       {EventType: audit.EventConfigChanged, DetailsJson: `[1,2]`},
		"details string":      {EventType: audit.EventConfigChanged, DetailsJson: `"x"`},
		"details null":        {EventType: audit.EventConfigChanged, DetailsJson: `null`},
		"details not json":    {EventType: audit.EventConfigChanged, DetailsJson: `{a:1}`},
		"details trailing":    {EventType: audit.EventConfigChanged, DetailsJson: `{} {}`},
		"details too big":     {EventType: audit.EventConfigChanged, DetailsJson: `{"a":"` + strings.Repeat("x", audit.MaxDetailsBytes) + `"}`},
		"field too long":      {EventType: audit.EventConfigChanged, ActorName: strings.Repeat("a", audit.MaxFieldBytes+1)},
		"field invalid utf-8": {EventType: audit.EventConfigChanged, PlanId: "\xff"},
		"plan id not one":     {EventType: audit.EventConfigChanged, PlanId: "plan 7"},
		"details too deep": {EventType: audit.EventConfigChanged,
			DetailsJson: `{"password":` + strings.Repeat("[", jsonobj.MaxDepth) + strings.Repeat("]", jsonobj.MaxDepth) + "}"},
		"details very deep": {EventType: audit.EventConfigChanged, DetailsJson: "{" + strings.Repeat(`"a":{`, 100_000)},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := audit.NewEntry(req, time.Now())
			if !errors.Is(err, errs.ErrInvalidArgument) {
				t.Fatalf("err = %v (entry %v), want INVALID_ARGUMENT", err, e)
			}
		})
	}
	// Details nesting as deep as allowed are taken (and masked).
	atLimit := `{"password":` + strings.Repeat("[", jsonobj.MaxDepth-1) + strings.Repeat("]", jsonobj.MaxDepth-1) + "}"
	if e, err := audit.NewEntry(&auditv1.RecordRequest{EventType: audit.EventConfigChanged, DetailsJson: atLimit}, time.Now()); err != nil ||
		e.DetailsJson != `{"password":"`+audit.Masked+`"}` {
		t.Fatalf("details nesting %d levels: %v, %v", jsonobj.MaxDepth, e, err)
	}
}

func TestRegistry(t *testing.T) {
	original := []string{"plan_applied", "plan_cancelled", "resource_modified", "correction_applied",
		"config_changed", "entity_deleted", "session_created", "auth_success", "auth_failure"}
	own := []string{audit.EventSessionClosed, audit.EventSessionDeleted, audit.EventPlanErrorRecorded,
		audit.EventAuditPruned, audit.EventMessageAppended, audit.EventTokenUsageUpdated}
	for _, typ := range append(original, own...) {
		if !audit.KnownEventType(typ) {
			t.Errorf("%s is not in the registry", typ)
		}
		if _, err := audit.NewEntry(&auditv1.RecordRequest{EventType: typ}, time.Now()); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
	if got := len(audit.EventTypes()); got < len(original)+len(own) {
		t.Errorf("EventTypes has %d types", got)
	}
}

func TestMaskingNestedCaseInsensitive(t *testing.T) {
	in := `{"user":"ann","Password":"hunter2","nested":{"API_KEY":"k1","deeper":{"client_secret":{"v":1},"ok":true}},` +
		`"list":[{"Authorization":"Bearer x"},{"token":42},"token"],"access-token":"t","prompt_tokens":12,` +
		`"max_retries":3,"note":"my password is not a key","apiKey":null,"db_password":["a","b"]}`
	e, err := audit.NewEntry(&auditv1.RecordRequest{EventType: audit.EventConfigChanged, DetailsJson: in}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"user":"ann","Password":"***","nested":{"API_KEY":"***","deeper":{"client_secret":"***","ok":true}},` +
		`"list":[{"Authorization":"***"},{"token":"***"},"token"],"access-token":"***","prompt_tokens":12,` +
		`"max_retries":3,"note":"my password is not a key","apiKey":"***","db_password":"***"}`
	if e.DetailsJson != want {
		t.Fatalf("masked details\n got %s\nwant %s", e.DetailsJson, want)
	}
	if strings.Contains(e.DetailsJson, "hunter2") || strings.Contains(e.DetailsJson, "Bearer") {
		t.Fatal("a secret survived masking")
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(e.DetailsJson), &v); err != nil {
		t.Fatalf("masked details are not JSON: %v", err)
	}
}

// A key is secret by what it decodes to: JSON escapes in a key must not
// hide it from masking, nor may an escape anywhere else unmask one.
func TestMaskingDecodesEscapedKeys(t *testing.T) {
	for in, want := range map[string]string{
		`{"\u0070assword":"hunter2"}`:                `{"password":"***"}`,
		`{"api\u005fkey":"hunter2","n":1}`:           `{"api_key":"***","n":1}`,
		`{"a":{"\u0054OKEN":["hunter2"]}}`:           `{"a":{"TOKEN":"***"}}`,
		`{"x":"\n","\u0063ookie":"hunter2"}`:         `{"x":"\n","cookie":"***"}`,
		`{"\u0073\u0065\u0063\u0072\u0065\u0074":1}`: `{"secret":"***"}`,
	} {
		e, err := audit.NewEntry(&auditv1.RecordRequest{EventType: audit.EventConfigChanged, DetailsJson: in}, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if e.DetailsJson != want {
			t.Errorf("%s: stored %s, want %s", in, e.DetailsJson, want)
		}
	}
	// Escapes without a secret key change nothing.
	in := `{"a":"<\n\u0041>"}`
	e, err := audit.NewEntry(&auditv1.RecordRequest{EventType: audit.EventConfigChanged, DetailsJson: in}, time.Now())
	if err != nil || e.DetailsJson != in {
		t.Fatalf("stored %q (%v), want %q", e.GetDetailsJson(), err, in)
	}
}

func TestMaskingKeepsOtherDetailsExactly(t *testing.T) {
	// No secret key: the normalized object is stored as is, numbers and
	// key order included.
	in := `{ "b": 1.50, "a": [1, {"z": "<&>"}], "n": 12345678901234567890 }`
	e, err := audit.NewEntry(&auditv1.RecordRequest{EventType: audit.EventConfigChanged, DetailsJson: in}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"b":1.50,"a":[1,{"z":"<&>"}],"n":12345678901234567890}`; e.DetailsJson != want {
		t.Fatalf("got %s, want %s", e.DetailsJson, want)
	}
}

func TestIsSecretKey(t *testing.T) {
	for key, want := range map[string]bool{
		"password": true, "PASSWORD": true, "Secret": true, "token": true, "api_key": true, "Api-Key": true,
		"authorization": true, "github_token": true, "private_key": true, "auth": true, "cookie": true,
		"tokens": false, "prompt_tokens": false, "user": false, "key": false, "monkey": false, "author": false,
	} {
		if got := audit.IsSecretKey(key); got != want {
			t.Errorf("IsSecretKey(%q) = %v, want %v", key, got, want)
		}
	}
}

// NewOwnEntry stores the caller's details as given ("{}" when empty) —
// neither compacted nor masked, which is the caller's promise to keep —
// and checks everything else as NewEntry does.
func TestNewOwnEntryTakesDetailsAsGiven(t *testing.T) {
	now := time.Now()
	for details, want := range map[string]string{"": "{}", `{"a":1}`: `{"a":1}`, `{"password":"x"}`: `{"password":"x"}`} {
		e, err := audit.NewOwnEntry(&auditv1.RecordRequest{EventType: audit.EventPlanErrorRecorded, PlanId: "p1",
			DetailsJson: details}, now)
		if err != nil || e.DetailsJson != want {
			t.Fatalf("NewOwnEntry(%q): %v, %v; want details %q", details, e, err, want)
		}
	}
	// NewEntry masks what NewOwnEntry was trusted with.
	if e, err := audit.NewEntry(&auditv1.RecordRequest{EventType: audit.EventPlanErrorRecorded,
		DetailsJson: `{"password":"x"}`}, now); err != nil || e.DetailsJson != `{"password":"***"}` {
		t.Fatalf("NewEntry: %v, %v", e, err)
	}
	for _, req := range []*auditv1.RecordRequest{
		{EventType: "no_such_event"},
		{EventType: audit.EventPlanErrorRecorded, PlanId: "not a plan id"},
		{EventType: audit.EventPlanErrorRecorded, ActorName: strings.Repeat("a", audit.MaxFieldBytes+1)},
		{EventType: audit.EventPlanErrorRecorded, DetailsJson: "{" + strings.Repeat(" ", audit.MaxDetailsBytes) + "}"},
	} {
		if _, err := audit.NewOwnEntry(req, now); errs.CodeOf(err) != errs.InvalidArgumentCode {
			t.Fatalf("NewOwnEntry(%v): %v, want INVALID_ARGUMENT", req, err)
		}
	}
}
