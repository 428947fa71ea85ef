package plan

import (
	"encoding/json"
	"testing"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"google.golang.org/protobuf/proto"
)

// appendString must produce JSON that decodes back to the same string for
// every ASCII byte (controls included) and multi-byte UTF-8.
func TestAppendStringRoundTrips(t *testing.T) {
	var all []byte
	for c := 0; c < 128; c++ {
		all = append(all, byte(c))
	}
	for _, s := range []string{"", string(all), "é ü – 日本 🙂", `a"b\c`, "\u2028\u2029"} {
		enc := appendString(nil, s)
		var got string
		if err := json.Unmarshal(enc, &got); err != nil || got != s {
			t.Fatalf("appendString(%q) = %s: decodes to %q, %v", s, enc, got, err)
		}
	}
}

// joinDetails and splitDetails are inverse: the other writers' keys and the
// recovery summary survive a store round trip unchanged.
func TestDetailsRoundTrip(t *testing.T) {
	foreign := map[string]json.RawMessage{"mode": json.RawMessage(`"stub"`), "n\"x": json.RawMessage(`{"a":[1,2]}`)}
	rec := &planv1.ErrorDetails{
		ErrorCategory: planv1.ErrorCategory_ERROR_CATEGORY_MERGE_CONFLICT, ErrorPhase: planv1.Phase_PHASE_APPLY,
		RetryCount: 2, MaxRetries: 3, IsRetriable: false,
		RecoveryAction: planv1.RecoveryAction_RECOVERY_ACTION_REVERT_TO_STRATEGIZE,
		RecoveryHint:   "revert the plan to its strategize phase (`node plan details --plan p`)\n", RecoveryCommand: "node plan details --plan p",
	}
	doc := joinDetails(foreign, rec)
	if !json.Valid([]byte(doc)) {
		t.Fatalf("not JSON: %s", doc)
	}
	f2, r2, err := splitDetails(doc)
	if err != nil || !proto.Equal(r2, rec) || len(f2) != 2 || string(f2["n\"x"]) != `{"a":[1,2]}` || string(f2["mode"]) != `"stub"` {
		t.Fatalf("round trip: %v %v %v from %s", f2, r2, err, doc)
	}
	if again := joinDetails(f2, r2); again != doc {
		t.Fatalf("not stable: %s vs %s", again, doc)
	}
	if doc := joinDetails(nil, nil); doc != "{}" {
		t.Fatalf("empty details: %s", doc)
	}
}

// TestForeignBytesIsTheStoredSize: the merge cap counts what the other
// writers' keys take when stored — escapes of their keys included — so a
// plan's error_details never stores more than the documented cap (a key of
// control characters once counted as its decoded length, a sixth of what
// it stores).
func TestForeignBytesIsTheStoredSize(t *testing.T) {
	ctrl := string([]byte{1, 2, 3, 4, 5, 6, 7, 8})
	cases := []struct{ foreign, add map[string]json.RawMessage }{
		{nil, nil},
		{nil, map[string]json.RawMessage{"a": json.RawMessage(`1`)}},
		{map[string]json.RawMessage{"a": json.RawMessage(`1`), "b": json.RawMessage(`"x"`)},
			map[string]json.RawMessage{"b": json.RawMessage(`[1,2,3]`), ctrl: json.RawMessage(`{"k":"v"}`)}},
		{map[string]json.RawMessage{`q"uote\`: json.RawMessage(`null`)}, map[string]json.RawMessage{"é日": json.RawMessage(`true`)}},
	}
	for _, c := range cases {
		merged := map[string]json.RawMessage{}
		for k, v := range c.foreign {
			merged[k] = v
		}
		for k, v := range c.add {
			merged[k] = v
		}
		if got, want := foreignBytes(c.foreign, c.add), len(joinDetails(merged, nil)); got != want {
			t.Errorf("foreignBytes = %d, stored %d bytes (%s)", got, want, joinDetails(merged, nil))
		}
	}
}
