package plan_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/plan"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
)

func decodeObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not a JSON object: %q: %v", s, err)
	}
	return m
}

// Other writers' keys and the recovery keys never clobber each other.
func TestErrorDetailsMergeKeepsOtherKeys(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)

	fresh, err := h.svc.ErrorDetails(ctx, &planv1.ErrorDetailsRequest{PlanId: "p"})
	if err != nil || fresh.GetDetailsJson() != "{}" || fresh.GetMaxRetries() != 3 || fresh.GetDetails().GetErrorCategory() != 0 {
		t.Fatalf("ErrorDetails of an unknown plan = %v, %v; want empty with max_retries 3", fresh, err)
	}

	m, err := h.svc.MergeErrorDetails(ctx, &planv1.MergeErrorDetailsRequest{PlanId: "p",
		DetailsJson: `{"strategy_decisions":["d1"],"mode":"stub"}`})
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeObject(t, m.GetDetailsJson()); got["mode"] != "stub" || len(got) != 2 {
		t.Fatalf("after merge: %v", got)
	}
	r := record(t, h.svc, timeoutOn("p", execute, "s"))
	if _, err := h.svc.MergeErrorDetails(ctx, &planv1.MergeErrorDetailsRequest{PlanId: "p",
		DetailsJson: `{"mode":"real","invariant_records":{"n":1}}`}); err != nil {
		t.Fatal(err)
	}
	// Nesting past jsonobj.MaxDepth (128 levels) is refused before any
	// decode, however deep.
	for _, deep := range []string{`{"d":` + strings.Repeat("[", 128) + strings.Repeat("]", 128) + "}", "{" + strings.Repeat(`"a":{`, 10_000)} {
		if _, err := h.svc.MergeErrorDetails(ctx, &planv1.MergeErrorDetailsRequest{PlanId: "p", DetailsJson: deep}); !isInvalid(err) ||
			!strings.Contains(err.Error(), "limit of 128 levels") {
			t.Errorf("merging details nesting past the limit = %v; want INVALID_ARGUMENT naming it", err)
		}
	}
	for _, key := range []string{"error_category", "retry_count", "recovery_action", "recovery_hint"} {
		_, err := h.svc.MergeErrorDetails(ctx, &planv1.MergeErrorDetailsRequest{PlanId: "p", DetailsJson: `{"` + key + `":"x"}`})
		if !isInvalid(err) {
			t.Errorf("merging recovery key %q = %v; want INVALID_ARGUMENT", key, err)
		}
	}

	got, err := h.svc.ErrorDetails(ctx, &planv1.ErrorDetailsRequest{PlanId: "p"})
	if err != nil {
		t.Fatal(err)
	}
	obj := decodeObject(t, got.GetDetailsJson())
	want := map[string]any{
		"strategy_decisions": []any{"d1"}, "mode": "real", "invariant_records": map[string]any{"n": float64(1)},
		"error_category": "transient", "error_phase": "execute", "retry_count": float64(1), "max_retries": float64(3),
		"is_retriable": true, "recovery_action": "retry", "recovery_hint": r.GetRecoveryHint(),
		"recovery_command": "node plan details --plan p",
	}
	if len(obj) != len(want) {
		t.Fatalf("details %v; want %v", obj, want)
	}
	for k, v := range want {
		if gv, _ := json.Marshal(obj[k]); string(gv) != mustJSON(v) {
			t.Errorf("details[%q] = %s; want %s", k, gv, mustJSON(v))
		}
	}
	d := got.GetDetails()
	if d.GetErrorCategory() != transient || d.GetErrorPhase() != execute || d.GetRetryCount() != 1 || d.GetMaxRetries() != 3 ||
		!d.GetIsRetriable() || d.GetRecoveryAction() != retry || d.GetRecoveryHint() != r.GetRecoveryHint() ||
		d.GetRecoveryCommand() != r.GetRecoveryCommand() {
		t.Fatalf("details summary %v does not match the latest record %v", d, r)
	}

	// After a reload, a later error rewrites only the recovery keys.
	if _, err := h.svc.MergeErrorDetails(ctx, &planv1.MergeErrorDetailsRequest{PlanId: "p",
		DetailsJson: `{"we\"ird <key>":"\u00e9\n"}`}); err != nil {
		t.Fatal(err)
	}
	h.svc.PassivateAll()
	record(t, h.svc, &planv1.RecordErrorRequest{PlanId: "p", Phase: strategize, StepId: "x", ErrorType: "Infeasible"})
	got, _ = h.svc.ErrorDetails(ctx, &planv1.ErrorDetailsRequest{PlanId: "p"})
	obj = decodeObject(t, got.GetDetailsJson())
	if obj["mode"] != "real" || obj["we\"ird <key>"] != "\u00e9\n" || obj["error_category"] != "strategy_constraint" ||
		obj["recovery_action"] != "revert_to_strategize" || len(obj) != len(want)+1 ||
		got.GetDetails().GetRecoveryCommand() != "node plan details --plan p" {
		t.Fatalf("after reload and a second error: %v", obj)
	}
}

// TestMergeCapIsWhatIsStored: the other writers' keys of one plan's
// error_details never take more than 4 × MaxMessageBytes as stored. Keys
// of control characters are stored escaped (six bytes each); the cap once
// counted them decoded, so such merges stored six times the cap.
func TestMergeCapIsWhatIsStored(t *testing.T) {
	const maxMsg = 1024
	h := newHarness(t, inMemory, plan.Config{MaxMessageBytes: maxMsg})
	ctx := ctxT(t)
	refused := false
	for i := range 40 {
		key := strings.Repeat(`\u0001`, 150) + strconv.Itoa(i) // 150 control characters: 900 bytes stored
		_, err := h.svc.MergeErrorDetails(ctx, &planv1.MergeErrorDetailsRequest{PlanId: "cap", DetailsJson: `{"` + key + `":1}`})
		if err != nil {
			if !isInvalid(err) {
				t.Fatalf("merge %d: %v, want INVALID_ARGUMENT past the cap", i, err)
			}
			refused = true
			break
		}
	}
	if !refused {
		t.Fatal("40 merges of ~900 stored bytes each were all accepted under a cap of 4 KiB")
	}
	got, err := h.svc.ErrorDetails(ctx, &planv1.ErrorDetailsRequest{PlanId: "cap"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.GetDetailsJson()); n > 4*maxMsg {
		t.Fatalf("error_details stores %d bytes of other writers' keys; the cap is %d", n, 4*maxMsg)
	}
}
