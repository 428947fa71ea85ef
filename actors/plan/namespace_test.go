package plan_test

import (
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/plan"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// A plan is (namespace, plan_id): the same plan id in two namespaces is
// two plans, each with its own sequence, retry counters, policy, details
// and history, and each one's audit entries belong to its namespace.
func TestSamePlanIDInTwoNamespacesIsTwoPlans(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	inA := func(r *planv1.RecordErrorRequest) *planv1.RecordErrorRequest { r.Namespace = "team-a"; return r }
	a0 := record(t, h.svc, inA(timeoutOn("p", execute, "s")))
	a1 := record(t, h.svc, inA(timeoutOn("p", execute, "s")))
	if _, err := h.svc.SetPolicy(ctx, &planv1.SetPolicyRequest{Namespace: "team-a", PlanId: "p", MaxRetries: 9}); err != nil {
		t.Fatal(err)
	}
	b0 := record(t, h.svc, &planv1.RecordErrorRequest{Namespace: "team-b", PlanId: "p", Phase: execute, StepId: "s",
		ErrorType: "timeout", Message: "timed out"})
	if a0.GetSequence() != 0 || a1.GetSequence() != 1 || a1.GetRetryCount() != 2 {
		t.Fatalf("team-a's records: %v, %v", a0, a1)
	}
	if b0.GetSequence() != 0 || b0.GetRetryCount() != 1 || b0.GetNamespace() != "team-b" || a0.GetNamespace() != "team-a" {
		t.Fatalf("team-b's first record: %v", b0)
	}
	da, err := h.svc.ErrorDetails(ctx, &planv1.ErrorDetailsRequest{Namespace: "team-a", PlanId: "p"})
	if err != nil {
		t.Fatal(err)
	}
	db, err := h.svc.ErrorDetails(ctx, &planv1.ErrorDetailsRequest{Namespace: "team-b", PlanId: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if da.GetMaxRetries() != 9 || db.GetMaxRetries() != persistence.DefaultMaxRetries || db.GetDetails().GetRetryCount() != 1 {
		t.Fatalf("details: team-a %v, team-b %v", da, db)
	}
	// The default namespace has no plan p at all.
	if rs := history(t, h.svc, "p"); len(rs) != 0 {
		t.Fatalf("plan p of the default namespace has %d records", len(rs))
	}
	hb, err := h.svc.History(ctx, &planv1.HistoryRequest{Namespace: "team-b", PlanId: "p"})
	if err != nil || len(hb.GetRecords()) != 1 || hb.GetRecords()[0].GetRecordId() != b0.GetRecordId() {
		t.Fatalf("team-b's history: %v (%v)", hb, err)
	}
	for ns, want := range map[string]int64{"team-a": 3, "team-b": 1, persistence.DefaultNamespace: 0} {
		n, err := h.store.Reader().CountAudit(ctx, &auditv1.Filter{PlanId: "p", Namespace: ns})
		if err != nil || n != want {
			t.Fatalf("audit entries of plan p in %s: %d (%v), want %d", ns, n, err, want)
		}
	}
	// A record id names one record of one plan: team-b cannot reuse
	// team-a's, and is not told whose it is.
	_, err = h.svc.RecordError(ctx, &planv1.RecordErrorRequest{Namespace: "team-b", PlanId: "p", Phase: execute,
		StepId: "s", ErrorType: "timeout", Message: "timed out", RecordId: a0.GetRecordId()})
	if errs.CodeOf(err) != errs.AlreadyExistsCode || strings.Contains(err.Error(), "team-a") {
		t.Fatalf("team-b reusing team-a's record id: %v, want ALREADY_EXISTS not naming team-a", err)
	}
	// The empty namespace is the default one.
	l0 := record(t, h.svc, timeoutOn("p", execute, "s"))
	l1 := record(t, h.svc, &planv1.RecordErrorRequest{Namespace: persistence.DefaultNamespace, PlanId: "p", Phase: execute,
		StepId: "s", ErrorType: "timeout", Message: "timed out"})
	if l0.GetSequence() != 0 || l1.GetSequence() != 1 || l1.GetNamespace() != persistence.DefaultNamespace {
		t.Fatalf("default namespace's records: %v, %v", l0, l1)
	}
	if n, err := h.store.Reader().CountAudit(ctx, &auditv1.Filter{EventType: audit.EventPlanErrorRecorded, Namespace: persistence.DefaultNamespace}); err != nil || n != 2 {
		t.Fatalf("default namespace's error entries: %d (%v), want 2", n, err)
	}
}

// The recovery command of a plan outside the default namespace names the
// namespace, so that running it reaches that plan.
func TestRecoveryCommandNamesTheNamespace(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	r := record(t, h.svc, &planv1.RecordErrorRequest{Namespace: "team a", PlanId: "p", Phase: execute, StepId: "s",
		ErrorType: "MergeConflict", Message: "conflict"})
	if want := "node plan details --namespace 'team a' --plan p"; r.GetRecoveryCommand() != want {
		t.Fatalf("recovery command %q, want %q", r.GetRecoveryCommand(), want)
	}
	if !strings.Contains(r.GetRecoveryHint(), "--namespace 'team a' --plan p") {
		t.Fatalf("recovery hint %q names no namespace", r.GetRecoveryHint())
	}
}

// A namespace a session could not have is refused, and nothing is stored.
func TestBadPlanNamespaceIsInvalid(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	bad := []string{"a\x00b", "\xff", strings.Repeat("n", 257)}
	for _, ns := range bad {
		_, err := h.svc.RecordError(ctx, &planv1.RecordErrorRequest{Namespace: ns, PlanId: "p", Phase: execute,
			StepId: "s", ErrorType: "timeout"})
		if !isInvalid(err) {
			t.Errorf("RecordError in namespace %q: %v, want INVALID_ARGUMENT", ns, err)
		}
		if _, err := h.svc.History(ctx, &planv1.HistoryRequest{Namespace: ns, PlanId: "p"}); !isInvalid(err) {
			t.Errorf("History in namespace %q: %v, want INVALID_ARGUMENT", ns, err)
		}
		if _, err := h.svc.ErrorDetails(ctx, &planv1.ErrorDetailsRequest{Namespace: ns, PlanId: "p"}); !isInvalid(err) {
			t.Errorf("ErrorDetails in namespace %q: %v, want INVALID_ARGUMENT", ns, err)
		}
	}
	if n, err := h.store.Reader().CountAudit(ctx, &auditv1.Filter{PlanId: "p"}); err != nil || n != 0 {
		t.Fatalf("%d audit entries (%v) after refused requests", n, err)
	}
}
