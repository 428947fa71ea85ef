package storetest

import (
	"errors"
	"fmt"
	"slices"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

func (h *harness) record(planID string, seq int64, phase planv1.Phase, cat planv1.ErrorCategory) *planv1.ErrorRecord {
	return &planv1.ErrorRecord{RecordId: ids.New(), PlanId: planID, Sequence: seq, Phase: phase, StepId: "step-1",
		ErrorType: "TimeoutError", Message: fmt.Sprintf("error %d", seq), Tool: "shell", ActorName: "actor",
		StackSummary: "at main", AttributesJson: `{"n":1}`, Category: cat, IsRetriable: true, RetryCount: 2,
		MaxRetries: 3, RecoveryAction: planv1.RecoveryAction_RECOVERY_ACTION_RETRY, RecoveryHint: "wait", Namespace: persistence.DefaultNamespace,
		RecoveryCommand: "retry", RecordedAt: h.ts()}
}

func (h *harness) plan(id string) *persistence.PlanState {
	h.Helper()
	p, err := h.r.GetPlan(h.ctx, "", id)
	if err != nil {
		h.Fatalf("GetPlan(%s): %v", id, err)
	}
	return p
}

func (h *harness) history(f persistence.PlanFilter) []*planv1.ErrorRecord {
	h.Helper()
	rs, err := h.r.PlanHistory(h.ctx, f)
	if err != nil {
		h.Fatalf("PlanHistory(%+v): %v", f, err)
	}
	return rs
}

func int32p(n int32) *int32 { return &n }

var planCases = []testCase{
	{"missing plan is NOT_FOUND", func(h *harness) {
		_, err := h.r.GetPlan(h.ctx, "", "nope")
		wantCode(h.T, err, errs.NotFoundCode)
		if rs := h.history(persistence.PlanFilter{PlanID: "nope"}); len(rs) != 0 {
			h.Fatalf("history of a missing plan: %v", rs)
		}
	}},
	{"first write creates the plan with defaults", func(h *harness) {
		h.ok(&persistence.PlanWrite{PlanID: "p"})
		p := h.plan("p")
		if p.PlanID != "p" || p.MaxRetries != persistence.DefaultMaxRetries || p.NextSequence != 0 ||
			p.ErrorDetailsJSON != "{}" || len(p.StepRetries) != 0 {
			h.Fatalf("new plan: %+v", p)
		}
	}},
	{"policy and details are upserted; zero values leave them alone", func(h *harness) {
		h.ok(&persistence.PlanWrite{PlanID: "p", MaxRetries: int32p(7), ErrorDetailsJSON: `{"a":1}`})
		h.ok(&persistence.PlanWrite{PlanID: "p"})
		if p := h.plan("p"); p.MaxRetries != 7 || p.ErrorDetailsJSON != `{"a":1}` {
			h.Fatalf("after empty write: %+v", p)
		}
		h.ok(&persistence.PlanWrite{PlanID: "p", MaxRetries: int32p(0), ErrorDetailsJSON: `{"a":1,"b":2}`})
		if p := h.plan("p"); p.MaxRetries != 0 || p.ErrorDetailsJSON != `{"a":1,"b":2}` {
			h.Fatalf("after update: %+v", p)
		}
	}},
	{"records continue the sequence; step counters upsert", func(h *harness) {
		r0 := h.record("p", 0, planv1.Phase_PHASE_EXECUTE, planv1.ErrorCategory_ERROR_CATEGORY_TRANSIENT)
		r1 := h.record("p", 1, planv1.Phase_PHASE_EXECUTE, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)
		h.ok(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{r0, r1},
			StepRetries: []persistence.StepRetry{{Phase: planv1.Phase_PHASE_EXECUTE, StepID: "s1", Count: 2}}})
		r2 := h.record("p", 2, planv1.Phase_PHASE_APPLY, planv1.ErrorCategory_ERROR_CATEGORY_AUTH)
		h.ok(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{r2},
			StepRetries: []persistence.StepRetry{
				{Phase: planv1.Phase_PHASE_EXECUTE, StepID: "s1", Count: 0},
				{Phase: planv1.Phase_PHASE_APPLY, StepID: "s2", Count: 1},
				{Phase: planv1.Phase_PHASE_ACTION, StepID: "s0", Count: 5},
			}})
		p := h.plan("p")
		want := []persistence.StepRetry{
			{Phase: planv1.Phase_PHASE_ACTION, StepID: "s0", Count: 5},
			{Phase: planv1.Phase_PHASE_EXECUTE, StepID: "s1", Count: 0},
			{Phase: planv1.Phase_PHASE_APPLY, StepID: "s2", Count: 1},
		}
		if p.NextSequence != 3 || !slices.Equal(p.StepRetries, want) {
			h.Fatalf("plan: %+v", p)
		}
		got := h.history(persistence.PlanFilter{PlanID: "p"})
		if len(got) != 3 {
			h.Fatalf("%d records", len(got))
		}
		for i, r := range []*planv1.ErrorRecord{r0, r1, r2} {
			if !proto.Equal(got[i], r) {
				h.Fatalf("record %d:\n got %v\nwant %v", i, got[i], r)
			}
		}
	}},
	{"taken or skipped sequence fails the write", func(h *harness) {
		h.ok(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{
			h.record("p", 0, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)}})
		for _, seq := range []int64{0, 2} {
			e := h.entry("error_recorded")
			h.fails(&persistence.PlanWrite{PlanID: "p", MaxRetries: int32p(9),
				Records:     []*planv1.ErrorRecord{h.record("p", seq, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)},
				StepRetries: []persistence.StepRetry{{Phase: planv1.Phase_PHASE_ACTION, StepID: "s", Count: 1}},
				Audit:       []*auditv1.AuditEntry{e}},
				errs.FailedPreconditionCode)
			if e.Position != 0 {
				h.Fatalf("failed write's audit entry assigned")
			}
		}
		if p := h.plan("p"); p.MaxRetries != persistence.DefaultMaxRetries || p.NextSequence != 1 || len(p.StepRetries) != 0 {
			h.Fatalf("failed writes changed the plan: %+v", p)
		}
	}},
	{"records of one write must be consecutive", func(h *harness) {
		h.ok(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{
			h.record("p", 0, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)}})
		h.fails(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{
			h.record("p", 1, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL),
			h.record("p", 3, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)}}, errs.FailedPreconditionCode)
		if p := h.plan("p"); p.NextSequence != 1 {
			h.Fatalf("next sequence %d after the refused write, want 1", p.NextSequence)
		}
	}},
	{"duplicate record id is ALREADY_EXISTS", func(h *harness) {
		r := h.record("p", 0, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)
		h.ok(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{r}})
		again := proto.Clone(r).(*planv1.ErrorRecord)
		again.Sequence = 1
		h.fails(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{again}}, errs.AlreadyExistsCode)
	}},
	{"stored record ids fail the write with the stored records, storing nothing", func(h *harness) {
		r0 := h.record("p", 0, planv1.Phase_PHASE_EXECUTE, planv1.ErrorCategory_ERROR_CATEGORY_TRANSIENT)
		r1 := h.record("p", 1, planv1.Phase_PHASE_EXECUTE, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)
		h.ok(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{r0, r1},
			StepRetries: []persistence.StepRetry{{Phase: planv1.Phase_PHASE_EXECUTE, StepID: "s", Count: 2}}})
		before := h.plan("p")
		audits := len(h.scan())
		// A new record first, then retries of both stored ones (under new
		// sequences and other content, as a retry computed afresh would
		// carry), with the counters and details such a retry would change.
		fresh := h.record("p", 2, planv1.Phase_PHASE_EXECUTE, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)
		retry1 := h.record("p", 3, planv1.Phase_PHASE_APPLY, planv1.ErrorCategory_ERROR_CATEGORY_AUTH)
		retry1.RecordId = r1.RecordId
		retry0 := h.record("p", 4, planv1.Phase_PHASE_APPLY, planv1.ErrorCategory_ERROR_CATEGORY_AUTH)
		retry0.RecordId, retry0.RetryCount = r0.RecordId, 9
		res := h.apply(&persistence.PlanWrite{PlanID: "p", MaxRetries: int32p(8), ErrorDetailsJSON: `{"x":1}`,
			Records:     []*planv1.ErrorRecord{fresh, retry1, retry0},
			StepRetries: []persistence.StepRetry{{Phase: planv1.Phase_PHASE_EXECUTE, StepID: "s", Count: 5}},
			Audit:       []*auditv1.AuditEntry{h.entry("plan_error_recorded")}})[0]
		wantCode(h.T, res.Err, errs.AlreadyExistsCode)
		var exist *persistence.RecordsExistError
		if !errors.As(res.Err, &exist) {
			h.Fatalf("error %v (%T) is not a *RecordsExistError", res.Err, res.Err)
		}
		if exist.PlanID != "p" || len(exist.Stored) != 2 {
			h.Fatalf("RecordsExistError: plan %q, %d stored records, want p and 2", exist.PlanID, len(exist.Stored))
		}
		byID := map[string]*planv1.ErrorRecord{}
		for _, s := range exist.Stored {
			byID[s.RecordId] = s
		}
		for _, want := range []*planv1.ErrorRecord{r0, r1} {
			if !proto.Equal(byID[want.RecordId], want) {
				h.Fatalf("stored record %s:\n got %v\nwant %v", want.RecordId, byID[want.RecordId], want)
			}
		}
		if p := h.plan("p"); p.MaxRetries != before.MaxRetries || p.ErrorDetailsJSON != before.ErrorDetailsJSON ||
			p.NextSequence != 2 || !slices.Equal(p.StepRetries, before.StepRetries) {
			h.Fatalf("the refused write changed the plan: %+v, was %+v", p, before)
		}
		if n := len(h.history(persistence.PlanFilter{PlanID: "p"})); n != 2 {
			h.Fatalf("%d records after the refused write, want 2", n)
		}
		if n := len(h.scan()); n != audits {
			h.Fatalf("%d audit entries after the refused write, want %d", n, audits)
		}
		// Without the retries, the same write commits.
		h.ok(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{fresh}})
		if p := h.plan("p"); p.NextSequence != 3 {
			h.Fatalf("next sequence %d, want 3", p.NextSequence)
		}
	}},
	{"a record id stored for another plan names that plan", func(h *harness) {
		r := h.record("other", 0, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)
		h.ok(&persistence.PlanWrite{PlanID: "other", Records: []*planv1.ErrorRecord{r}})
		mine := h.record("p", 0, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)
		mine.RecordId = r.RecordId
		err := h.apply(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{mine}})[0].Err
		var exist *persistence.RecordsExistError
		if !errors.As(err, &exist) || len(exist.Stored) != 1 || !proto.Equal(exist.Stored[0], r) {
			h.Fatalf("got %v, want a RecordsExistError with plan other's record", err)
		}
		if _, err := h.r.GetPlan(h.ctx, "", "p"); errs.CodeOf(err) != errs.NotFoundCode {
			h.Fatalf("the refused first write created plan p: %v", err)
		}
	}},
	{"a record id twice in one write is INVALID_ARGUMENT", func(h *harness) {
		r0 := h.record("p", 0, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)
		r1 := h.record("p", 1, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)
		r1.RecordId = r0.RecordId
		h.fails(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{r0, r1}}, errs.InvalidArgumentCode)
		if n := len(h.history(persistence.PlanFilter{PlanID: "p"})); n != 0 {
			h.Fatalf("%d records stored", n)
		}
	}},
	{"new plan with a failing first write is not created", func(h *harness) {
		h.fails(&persistence.PlanWrite{PlanID: "q", Records: []*planv1.ErrorRecord{
			h.record("q", 5, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)}}, errs.FailedPreconditionCode)
		_, err := h.r.GetPlan(h.ctx, "", "q")
		wantCode(h.T, err, errs.NotFoundCode)
	}},
	{"history filters and pages", func(h *harness) {
		phases := []planv1.Phase{planv1.Phase_PHASE_ACTION, planv1.Phase_PHASE_EXECUTE, planv1.Phase_PHASE_APPLY}
		cats := []planv1.ErrorCategory{planv1.ErrorCategory_ERROR_CATEGORY_TRANSIENT, planv1.ErrorCategory_ERROR_CATEGORY_AUTH}
		var recs []*planv1.ErrorRecord
		for i := int64(0); i < 12; i++ {
			recs = append(recs, h.record("p", i, phases[i%3], cats[i%2]))
		}
		h.ok(&persistence.PlanWrite{PlanID: "p", Records: recs})
		h.ok(&persistence.PlanWrite{PlanID: "other", Records: []*planv1.ErrorRecord{
			h.record("other", 0, phases[0], cats[0])}})
		seqs := func(f persistence.PlanFilter) []int64 {
			var out []int64
			for _, r := range h.history(f) {
				if r.PlanId != f.PlanID {
					h.Fatalf("record of plan %s in history of %s", r.PlanId, f.PlanID)
				}
				out = append(out, r.Sequence)
			}
			return out
		}
		cases := []struct {
			f    persistence.PlanFilter
			want []int64
		}{
			{persistence.PlanFilter{PlanID: "p"}, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
			{persistence.PlanFilter{PlanID: "p", Phase: planv1.Phase_PHASE_EXECUTE}, []int64{1, 4, 7, 10}},
			{persistence.PlanFilter{PlanID: "p", Category: planv1.ErrorCategory_ERROR_CATEGORY_AUTH}, []int64{1, 3, 5, 7, 9, 11}},
			{persistence.PlanFilter{PlanID: "p", Phase: planv1.Phase_PHASE_ACTION, Category: planv1.ErrorCategory_ERROR_CATEGORY_AUTH}, []int64{3, 9}},
			{persistence.PlanFilter{PlanID: "p", FromSequence: 5, Limit: 3}, []int64{5, 6, 7}},
			{persistence.PlanFilter{PlanID: "p", Phase: planv1.Phase_PHASE_APPLY, FromSequence: 3}, []int64{5, 8, 11}},
			{persistence.PlanFilter{PlanID: "p", FromSequence: 12}, nil},
			{persistence.PlanFilter{PlanID: "other"}, []int64{0}},
		}
		for _, c := range cases {
			if got := seqs(c.f); !slices.Equal(got, c.want) {
				h.Fatalf("PlanHistory(%+v) = %v, want %v", c.f, got, c.want)
			}
		}
	}},
}
