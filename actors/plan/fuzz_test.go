package plan

import (
	"errors"
	"testing"
	"unicode/utf8"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/jsonobj"
)

// FuzzValidateRecordError: a RecordError is refused as INVALID_ARGUMENT or
// is stored as given (a record_id only if it is a ULID), with attributes
// normalized to a JSON object, and its
// classification is deterministic and complete (a category, an action, a
// hint and a command that name the plan).
func FuzzValidateRecordError(f *testing.F) {
	f.Add("plan-1", int32(3), "build", "TimeoutError", "tool timed out", "shell", "executor", "", `{"try":1}`, "")
	f.Add("", int32(0), "", "", "\xff", "", "", "", "[]", "x")
	f.Add("01HXM2A6K1P2E9Q9D4GQ7J4S7Z", int32(9), "s p a c e", "merge_conflict", "CONFLICT in a.go", "", "", "trace", "", "01HXM2A6K1P2E9Q9D4GQ7J4S7Z")
	f.Add("p", int32(3), "s", "TimeoutError", "", "", "", "", "", "01hxm2a6k1p2e9q9d4gq7j4s7z")
	const max = 256
	f.Fuzz(func(t *testing.T, planID string, phase int32, step, typ, msg, tool, actor, stack, attrs, recordID string) {
		r := &planv1.RecordErrorRequest{PlanId: planID, Phase: planv1.Phase(phase), StepId: step, ErrorType: typ,
			Message: msg, Tool: tool, ActorName: actor, StackSummary: stack, AttributesJson: attrs, RecordId: recordID}
		v, err := validateRecordError(r, max)
		if err != nil {
			if !errors.Is(err, errs.ErrInvalidArgument) {
				t.Fatalf("validator returned %v; want INVALID_ARGUMENT", err)
			}
			return
		}
		if r.AttributesJson != attrs {
			t.Fatal("the caller's request was modified")
		}
		if _, err := jsonobj.Decode(v.AttributesJson); err != nil || !utf8.ValidString(v.Message) || len(v.Message) > max {
			t.Fatalf("accepted a record the store would refuse: %v", v)
		}
		// A record id is kept as given, and only a canonical ULID is.
		if v.RecordId != recordID || (recordID != "" && ids.Check("record_id", recordID) != nil) {
			t.Fatalf("record_id %q accepted as %q", recordID, v.RecordId)
		}
		c1, c2 := Classify(v.ErrorType, v.Message), Classify(v.ErrorType, v.Message)
		if c1 != c2 {
			t.Fatalf("classification is not deterministic: %v vs %v", c1, c2)
		}
		d := Decide(c1, v.PlanId, 1, 3)
		if d.Action == planv1.RecoveryAction_RECOVERY_ACTION_UNSPECIFIED || d.Hint == "" {
			t.Fatalf("no decision for %q: %+v", v.ErrorType, d)
		}
	})
}
