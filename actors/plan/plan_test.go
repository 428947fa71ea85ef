package plan_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/plan"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
)

const (
	execute    = planv1.Phase_PHASE_EXECUTE
	strategize = planv1.Phase_PHASE_STRATEGIZE
)

func record(t *testing.T, svc *plan.Service, req *planv1.RecordErrorRequest) *planv1.ErrorRecord {
	t.Helper()
	resp, err := svc.RecordError(ctxT(t), req)
	if err != nil {
		t.Fatalf("RecordError(%v): %v", req, err)
	}
	return resp.GetRecord()
}

func timeoutOn(planID string, phase planv1.Phase, step string) *planv1.RecordErrorRequest {
	return &planv1.RecordErrorRequest{PlanId: planID, Phase: phase, StepId: step, ErrorType: "timeout", Message: "timed out"}
}

// The record carries everything the request said plus what the actor
// decided; the first error of a plan has sequence 0.
func TestRecordErrorFields(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	r := record(t, h.svc, &planv1.RecordErrorRequest{
		PlanId: "plan-a", Phase: planv1.Phase_PHASE_APPLY, StepId: "write-files", ErrorType: "MergeConflict",
		Message: "conflict in main.go", Tool: "git", ActorName: "applier", StackSummary: "apply.py:12",
		AttributesJson: ` { "file" : "main.go" } `,
	})
	if err := ids.Check("record_id", r.GetRecordId()); err != nil {
		t.Fatal(err)
	}
	want := &planv1.ErrorRecord{
		RecordId: r.GetRecordId(), Namespace: persistence.DefaultNamespace, PlanId: "plan-a", Sequence: 0, Phase: planv1.Phase_PHASE_APPLY,
		StepId: "write-files", ErrorType: "MergeConflict", Message: "conflict in main.go", Tool: "git",
		ActorName: "applier", StackSummary: "apply.py:12", AttributesJson: `{"file":"main.go"}`,
		Category: merge, IsRetriable: false, RetryCount: 1, MaxRetries: 3, RecoveryAction: revert,
		RecoveryHint:    plan.Decide(plan.ClassificationOf(merge), "plan-a", 1, 3).Hint,
		RecoveryCommand: "node plan details --plan plan-a",
		RecordedAt:      r.GetRecordedAt(),
	}
	if r.String() != want.String() {
		t.Fatalf("record\n got %v\nwant %v", r, want)
	}
	if r.GetRecordedAt() == nil {
		t.Fatal("recorded_at not set")
	}
}

// Policy limits: -1 and 101 are refused; 0 escalates the first retriable
// error; 100 retries a hundred times and escalates the 101st; a policy
// applies to errors recorded after it.
func TestPolicyLimits(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	for _, bad := range []int32{-1, 101, 1 << 30} {
		if _, err := h.svc.SetPolicy(ctx, &planv1.SetPolicyRequest{PlanId: "p", MaxRetries: bad}); !isInvalid(err) {
			t.Errorf("SetPolicy(%d) = %v; want INVALID_ARGUMENT", bad, err)
		}
	}

	resp, err := h.svc.SetPolicy(ctx, &planv1.SetPolicyRequest{PlanId: "zero", MaxRetries: 0})
	if err != nil || resp.GetMaxRetries() != 0 || resp.GetPlanId() != "zero" {
		t.Fatalf("SetPolicy(0) = %v, %v", resp, err)
	}
	if r := record(t, h.svc, timeoutOn("zero", execute, "s")); r.GetRecoveryAction() != escalate || r.GetMaxRetries() != 0 {
		t.Fatalf("max 0, first retriable error: %v (max %d); want escalate", r.GetRecoveryAction(), r.GetMaxRetries())
	}
	// A non-retriable error keeps its default action whatever the limit.
	if r := record(t, h.svc, &planv1.RecordErrorRequest{PlanId: "zero", Phase: execute, StepId: "s", ErrorType: "AuthenticationError"}); r.GetRecoveryAction() != prompt {
		t.Fatalf("auth under max 0: %v; want prompt", r.GetRecoveryAction())
	}

	if _, err := h.svc.SetPolicy(ctx, &planv1.SetPolicyRequest{PlanId: "max", MaxRetries: 100}); err != nil {
		t.Fatal(err)
	}
	for i := int32(1); i <= 101; i++ {
		r := record(t, h.svc, &planv1.RecordErrorRequest{PlanId: "max", Phase: execute, StepId: "s", ErrorType: "ToolError"})
		want := retry
		if i == 101 {
			want = escalate
		}
		if r.GetRetryCount() != i || r.GetRecoveryAction() != want || r.GetMaxRetries() != 100 {
			t.Fatalf("max 100, error %d: retry_count %d action %v; want %d %v", i, r.GetRetryCount(), r.GetRecoveryAction(), i, want)
		}
	}

	// Default 3: errors 1..3 retry, the 4th escalates; raising the policy
	// turns the 5th back into a retry.
	for i := int32(1); i <= 4; i++ {
		r := record(t, h.svc, timeoutOn("dflt", execute, "s"))
		if want := map[bool]planv1.RecoveryAction{true: retry, false: escalate}[i <= 3]; r.GetRecoveryAction() != want {
			t.Fatalf("default policy, error %d: %v; want %v", i, r.GetRecoveryAction(), want)
		}
	}
	if _, err := h.svc.SetPolicy(ctx, &planv1.SetPolicyRequest{PlanId: "dflt", MaxRetries: 5}); err != nil {
		t.Fatal(err)
	}
	if r := record(t, h.svc, timeoutOn("dflt", execute, "s")); r.GetRetryCount() != 5 || r.GetRecoveryAction() != retry {
		t.Fatalf("after policy 5: retry_count %d action %v; want 5 retry", r.GetRetryCount(), r.GetRecoveryAction())
	}
	details, err := h.svc.ErrorDetails(ctx, &planv1.ErrorDetailsRequest{PlanId: "dflt"})
	if err != nil || details.GetMaxRetries() != 5 {
		t.Fatalf("ErrorDetails max_retries: %v, %v; want 5", details.GetMaxRetries(), err)
	}
	n, err := h.store.Reader().CountAudit(ctx, &auditv1.Filter{EventType: audit.EventPlanPolicySet})
	if err != nil || n != 3 {
		t.Fatalf("plan_policy_set entries: %d, %v; want 3", n, err)
	}
}

// RecordSuccess resets exactly one (phase, step) counter, reports what it
// was, and the step's next error counts from 1 again.
func TestRecordSuccessResetsStep(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	for i := 0; i < 4; i++ {
		record(t, h.svc, timeoutOn("p", execute, "a"))
	}
	record(t, h.svc, timeoutOn("p", execute, "b"))
	record(t, h.svc, timeoutOn("p", strategize, "a"))

	resp, err := h.svc.RecordSuccess(ctx, &planv1.RecordSuccessRequest{PlanId: "p", Phase: execute, StepId: "a"})
	if err != nil || resp.GetPreviousRetryCount() != 4 {
		t.Fatalf("RecordSuccess = %v, %v; want previous 4", resp, err)
	}
	if r := record(t, h.svc, timeoutOn("p", execute, "a")); r.GetRetryCount() != 1 || r.GetRecoveryAction() != retry {
		t.Fatalf("after reset: retry_count %d %v; want 1 retry", r.GetRetryCount(), r.GetRecoveryAction())
	}
	if r := record(t, h.svc, timeoutOn("p", execute, "b")); r.GetRetryCount() != 2 {
		t.Fatalf("other step: retry_count %d; want 2 (untouched by the reset)", r.GetRetryCount())
	}
	if r := record(t, h.svc, timeoutOn("p", strategize, "a")); r.GetRetryCount() != 2 {
		t.Fatalf("same step id, other phase: retry_count %d; want 2", r.GetRetryCount())
	}
	resp, err = h.svc.RecordSuccess(ctx, &planv1.RecordSuccessRequest{PlanId: "p", Phase: execute, StepId: "never"})
	if err != nil || resp.GetPreviousRetryCount() != 0 {
		t.Fatalf("RecordSuccess of a step without errors = %v, %v; want previous 0", resp, err)
	}

	// The reset survives a reload.
	if _, err := h.svc.RecordSuccess(ctx, &planv1.RecordSuccessRequest{PlanId: "p", Phase: execute, StepId: "b"}); err != nil {
		t.Fatal(err)
	}
	h.svc.PassivateAll()
	if r := record(t, h.svc, timeoutOn("p", execute, "b")); r.GetRetryCount() != 1 {
		t.Fatalf("after reset and reload: retry_count %d; want 1", r.GetRetryCount())
	}
	if r := record(t, h.svc, timeoutOn("p", execute, "a")); r.GetRetryCount() != 2 {
		t.Fatalf("after reload: retry_count %d; want 2", r.GetRetryCount())
	}
	n, err := h.store.Reader().CountAudit(ctx, &auditv1.Filter{EventType: audit.EventPlanRetryReset, PlanId: "p"})
	if err != nil || n != 3 {
		t.Fatalf("plan_retry_reset entries: %d, %v; want 3", n, err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Every malformed request is INVALID_ARGUMENT and stores nothing.
func TestValidationErrors(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{MaxMessageBytes: 1024})
	ctx := ctxT(t)
	ok := func() *planv1.RecordErrorRequest {
		return &planv1.RecordErrorRequest{PlanId: "p", Phase: execute, StepId: "s", ErrorType: "timeout"}
	}
	big := strings.Repeat("x", 1025)
	bad := map[string]func(r *planv1.RecordErrorRequest){
		"empty plan_id":        func(r *planv1.RecordErrorRequest) { r.PlanId = "" },
		"plan_id charset":      func(r *planv1.RecordErrorRequest) { r.PlanId = "a b" },
		"plan_id too long":     func(r *planv1.RecordErrorRequest) { r.PlanId = strings.Repeat("p", 129) },
		"phase unspecified":    func(r *planv1.RecordErrorRequest) { r.Phase = planv1.Phase_PHASE_UNSPECIFIED },
		"phase out of range":   func(r *planv1.RecordErrorRequest) { r.Phase = 9 },
		"empty error_type":     func(r *planv1.RecordErrorRequest) { r.ErrorType = "" },
		"error_type too long":  func(r *planv1.RecordErrorRequest) { r.ErrorType = strings.Repeat("e", 257) },
		"step_id control char": func(r *planv1.RecordErrorRequest) { r.StepId = "a\nb" },
		"step_id not UTF-8":    func(r *planv1.RecordErrorRequest) { r.StepId = "\xff" },
		"tool too long":        func(r *planv1.RecordErrorRequest) { r.Tool = strings.Repeat("t", 257) },
		"actor_name not UTF-8": func(r *planv1.RecordErrorRequest) { r.ActorName = "\xc3" },
		"message too large":    func(r *planv1.RecordErrorRequest) { r.Message = big },
		"message not UTF-8":    func(r *planv1.RecordErrorRequest) { r.Message = "bad \xff" },
		"stack too large":      func(r *planv1.RecordErrorRequest) { r.StackSummary = big },
		"attributes not JSON":  func(r *planv1.RecordErrorRequest) { r.AttributesJson = "{" },
		"attributes an array":  func(r *planv1.RecordErrorRequest) { r.AttributesJson = "[1]" },
		"attributes too large": func(r *planv1.RecordErrorRequest) { r.AttributesJson = `{"a":"` + big + `"}` },
	}
	for name, mutate := range bad {
		r := ok()
		mutate(r)
		if _, err := h.svc.RecordError(ctx, r); !isInvalid(err) {
			t.Errorf("%s: %v; want INVALID_ARGUMENT", name, err)
		}
	}
	// Exactly at the limit is fine (on another plan, to keep "p" empty).
	at := ok()
	at.PlanId, at.Message, at.StackSummary = "edge", strings.Repeat("m", 1024), strings.Repeat("s", 1024)
	if _, err := h.svc.RecordError(ctx, at); err != nil {
		t.Fatalf("message and stack at the limit: %v", err)
	}

	others := map[string]error{}
	_, others["SetPolicy bad id"] = h.svc.SetPolicy(ctx, &planv1.SetPolicyRequest{PlanId: "", MaxRetries: 1})
	_, others["RecordSuccess phase"] = h.svc.RecordSuccess(ctx, &planv1.RecordSuccessRequest{PlanId: "p"})
	_, others["RecordSuccess bad id"] = h.svc.RecordSuccess(ctx, &planv1.RecordSuccessRequest{PlanId: "p/q", Phase: execute})
	_, others["Merge not JSON"] = h.svc.MergeErrorDetails(ctx, &planv1.MergeErrorDetailsRequest{PlanId: "p", DetailsJson: "nope"})
	_, others["Merge too large"] = h.svc.MergeErrorDetails(ctx, &planv1.MergeErrorDetailsRequest{PlanId: "p", DetailsJson: `{"a":"` + big + `"}`})
	_, others["Merge bad id"] = h.svc.MergeErrorDetails(ctx, &planv1.MergeErrorDetailsRequest{DetailsJson: "{}"})
	_, others["History bad id"] = h.svc.History(ctx, &planv1.HistoryRequest{PlanId: "a b"})
	_, others["History phase"] = h.svc.History(ctx, &planv1.HistoryRequest{PlanId: "p", Phase: 7})
	_, others["History category"] = h.svc.History(ctx, &planv1.HistoryRequest{PlanId: "p", Category: 10})
	_, others["History from"] = h.svc.History(ctx, &planv1.HistoryRequest{PlanId: "p", FromSequence: -1})
	_, others["History limit"] = h.svc.History(ctx, &planv1.HistoryRequest{PlanId: "p", Limit: -1})
	_, others["ErrorDetails bad id"] = h.svc.ErrorDetails(ctx, &planv1.ErrorDetailsRequest{})
	for name, err := range others {
		if !isInvalid(err) {
			t.Errorf("%s: %v; want INVALID_ARGUMENT", name, err)
		}
	}

	// The other writers' part of error_details is bounded (4 × 1024 here).
	for i := 0; i < 4; i++ {
		_, err := h.svc.MergeErrorDetails(ctx, &planv1.MergeErrorDetailsRequest{PlanId: "full",
			DetailsJson: `{"k` + string(rune('0'+i)) + `":"` + strings.Repeat("v", 900) + `"}`})
		if err != nil {
			t.Fatalf("merge %d: %v", i, err)
		}
	}
	if _, err := h.svc.MergeErrorDetails(ctx, &planv1.MergeErrorDetailsRequest{PlanId: "full",
		DetailsJson: `{"k9":"` + strings.Repeat("v", 900) + `"}`}); !isInvalid(err) {
		t.Fatalf("merge beyond the details bound: %v; want INVALID_ARGUMENT", err)
	}

	if recs := history(t, h.svc, "p"); len(recs) != 0 {
		t.Fatalf("rejected requests stored %d records", len(recs))
	}
	if _, err := h.store.Reader().GetPlan(ctx, "", "p"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("rejected requests created the plan: %v", err)
	}
}

// History pages through a plan in sequence order and filters by phase and
// category; the cursor is the next sequence.
func TestHistoryPagingAndFilters(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	types := []string{"timeout", "ValidationError", "timeout", "MergeConflict", "timeout", "ValidationError", "timeout"}
	for i, et := range types {
		phase := execute
		if i%2 == 1 {
			phase = strategize
		}
		record(t, h.svc, &planv1.RecordErrorRequest{PlanId: "p", Phase: phase, StepId: "s", ErrorType: et})
	}
	var seqs []int64
	pages := 0
	for from := int64(0); from >= 0; pages++ {
		resp, err := h.svc.History(ctx, &planv1.HistoryRequest{PlanId: "p", FromSequence: from, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.GetRecords() {
			seqs = append(seqs, r.GetSequence())
		}
		from = resp.GetNextSequence()
	}
	if len(seqs) != 7 || pages != 3 {
		t.Fatalf("paged sequences %v in %d pages; want 0..6 in 3", seqs, pages)
	}
	for i, s := range seqs {
		if s != int64(i) {
			t.Fatalf("paged sequences %v not in order", seqs)
		}
	}
	resp, err := h.svc.History(ctx, &planv1.HistoryRequest{PlanId: "p", Category: transient})
	if err != nil || len(resp.GetRecords()) != 4 || resp.GetNextSequence() != -1 {
		t.Fatalf("category filter: %d records, next %d, %v; want 4, -1", len(resp.GetRecords()), resp.GetNextSequence(), err)
	}
	resp, err = h.svc.History(ctx, &planv1.HistoryRequest{PlanId: "p", Phase: strategize, Category: validation})
	if err != nil || len(resp.GetRecords()) != 2 {
		t.Fatalf("phase+category filter: %d records, %v; want 2", len(resp.GetRecords()), err)
	}
	for _, r := range resp.GetRecords() {
		if r.GetPhase() != strategize || r.GetCategory() != validation {
			t.Fatalf("filtered record %v", r)
		}
	}
	resp, err = h.svc.History(ctx, &planv1.HistoryRequest{PlanId: "p", FromSequence: 5, Limit: 5000})
	if err != nil || len(resp.GetRecords()) != 2 || resp.GetRecords()[0].GetSequence() != 5 {
		t.Fatalf("from 5 with a clamped limit: %v, %v", resp, err)
	}
	resp, err = h.svc.History(ctx, &planv1.HistoryRequest{PlanId: "unknown-plan"})
	if err != nil || len(resp.GetRecords()) != 0 || resp.GetNextSequence() != -1 {
		t.Fatalf("unknown plan: %v, %v; want empty", resp, err)
	}
}

// Stop lets the in-flight work finish, then refuses calls.
func TestStop(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	record(t, h.svc, timeoutOn("p", execute, "s"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := h.svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := h.svc.RecordError(ctxT(t), timeoutOn("p", execute, "s")); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("RecordError after Stop: %v; want UNAVAILABLE", err)
	}
	if h.svc.ActiveActors() != 0 {
		t.Fatalf("%d plan actors live after Stop", h.svc.ActiveActors())
	}
}
