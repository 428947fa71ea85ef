package storetest

import (
	"errors"
	"slices"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

// nsRecord is h.record for plan planID of namespace ns.
func (h *harness) nsRecord(ns, planID string, seq int64) *planv1.ErrorRecord {
	r := h.record(planID, seq, planv1.Phase_PHASE_EXECUTE, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)
	r.Namespace = ns
	return r
}

// nsPlan is the stored state of plan planID of namespace ns.
func (h *harness) nsPlan(ns, planID string) *persistence.PlanState {
	h.Helper()
	p, err := h.r.GetPlan(h.ctx, ns, planID)
	if err != nil {
		h.Fatalf("GetPlan(%s, %s): %v", ns, planID, err)
	}
	return p
}

// A plan is (namespace, plan id): the same id in two namespaces is two
// plans, each with its own row, sequence, counters, history and epoch.
var planNamespaceCases = []testCase{
	{"the same plan id in two namespaces is two plans", func(h *harness) {
		h.ok(&persistence.PlanWrite{Namespace: "a", PlanID: "p", MaxRetries: int32p(7), ErrorDetailsJSON: `{"a":1}`,
			Records:     []*planv1.ErrorRecord{h.nsRecord("a", "p", 0), h.nsRecord("a", "p", 1)},
			StepRetries: []persistence.StepRetry{{Phase: planv1.Phase_PHASE_EXECUTE, StepID: "s", Count: 2}}})
		// b's plan p starts at sequence 0: a's records are not its.
		rb := h.nsRecord("b", "p", 0)
		h.ok(&persistence.PlanWrite{Namespace: "b", PlanID: "p", Records: []*planv1.ErrorRecord{rb}})
		a, b := h.nsPlan("a", "p"), h.nsPlan("b", "p")
		if a.Namespace != "a" || a.MaxRetries != 7 || a.NextSequence != 2 || a.ErrorDetailsJSON != `{"a":1}` || len(a.StepRetries) != 1 {
			h.Fatalf("plan a/p: %+v", a)
		}
		if b.Namespace != "b" || b.MaxRetries != persistence.DefaultMaxRetries || b.NextSequence != 1 ||
			b.ErrorDetailsJSON != "{}" || len(b.StepRetries) != 0 {
			h.Fatalf("plan b/p: %+v", b)
		}
		if _, err := h.r.GetPlan(h.ctx, "", "p"); errs.CodeOf(err) != errs.NotFoundCode {
			h.Fatalf("plan p of the default namespace: %v, want NOT_FOUND", err)
		}
		got := h.history(persistence.PlanFilter{Namespace: "b", PlanID: "p"})
		if len(got) != 1 || !proto.Equal(got[0], rb) {
			h.Fatalf("history of b/p: %v, want only %v", got, rb)
		}
		var seqs []int64
		for _, r := range h.history(persistence.PlanFilter{Namespace: "a", PlanID: "p"}) {
			if r.Namespace != "a" || r.PlanId != "p" {
				h.Fatalf("record of %s/%s in the history of a/p", r.Namespace, r.PlanId)
			}
			seqs = append(seqs, r.Sequence)
		}
		if !slices.Equal(seqs, []int64{0, 1}) {
			h.Fatalf("history of a/p: sequences %v, want [0 1]", seqs)
		}
		if rs := h.history(persistence.PlanFilter{PlanID: "p"}); len(rs) != 0 {
			h.Fatalf("history of p in the default namespace: %v", rs)
		}
	}},
	{"the empty namespace is the default one", func(h *harness) {
		h.ok(&persistence.PlanWrite{PlanID: "p", MaxRetries: int32p(5)})
		p := h.nsPlan(persistence.DefaultNamespace, "p")
		if p.Namespace != persistence.DefaultNamespace || p.MaxRetries != 5 {
			h.Fatalf("plan p: %+v", p)
		}
		h.ok(&persistence.PlanWrite{Namespace: persistence.DefaultNamespace, PlanID: "p",
			Records: []*planv1.ErrorRecord{h.nsRecord("", "p", 0)}})
		rs := h.history(persistence.PlanFilter{PlanID: "p"})
		if len(rs) != 1 || rs[0].Namespace != persistence.DefaultNamespace {
			h.Fatalf("history of p: %v", rs)
		}
	}},
	{"a record of another namespace is refused", func(h *harness) {
		h.fails(&persistence.PlanWrite{Namespace: "a", PlanID: "p",
			Records: []*planv1.ErrorRecord{h.nsRecord("b", "p", 0)}}, errs.InvalidArgumentCode)
		if _, err := h.r.GetPlan(h.ctx, "a", "p"); errs.CodeOf(err) != errs.NotFoundCode {
			h.Fatalf("the refused write created a/p: %v", err)
		}
	}},
	{"a record id stored in another namespace's plan fails the write", func(h *harness) {
		ra := h.nsRecord("a", "p", 0)
		h.ok(&persistence.PlanWrite{Namespace: "a", PlanID: "p", Records: []*planv1.ErrorRecord{ra}})
		mine := h.nsRecord("b", "p", 0)
		mine.RecordId = ra.RecordId
		err := h.apply(&persistence.PlanWrite{Namespace: "b", PlanID: "p", Records: []*planv1.ErrorRecord{mine}})[0].Err
		var exist *persistence.RecordsExistError
		if !errors.As(err, &exist) || len(exist.Stored) != 1 || exist.Stored[0].Namespace != "a" {
			h.Fatalf("got %v, want a RecordsExistError with a/p's record", err)
		}
		if _, err := h.r.GetPlan(h.ctx, "b", "p"); errs.CodeOf(err) != errs.NotFoundCode {
			h.Fatalf("the refused write created b/p: %v", err)
		}
	}},
	{"each namespace's plan has its own epoch", func(h *harness) {
		h.activate(persistence.OwnerPlan, persistence.PlanKey("a", "p"), 1)
		h.activate(persistence.OwnerPlan, persistence.PlanKey("a", "p"), 2)
		h.activate(persistence.OwnerPlan, persistence.PlanKey("b", "p"), 1)
		// b's owner at epoch 1 is current although a's plan p is at 2.
		h.ok(&persistence.PlanWrite{Epoch: 1, Namespace: "b", PlanID: "p", MaxRetries: int32p(4)})
		h.fencedOnly(&persistence.PlanWrite{Epoch: 1, Namespace: "a", PlanID: "p", MaxRetries: int32p(9)})
		h.ok(&persistence.PlanWrite{Epoch: 2, Namespace: "a", PlanID: "p", MaxRetries: int32p(6)})
		if a, b := h.nsPlan("a", "p"), h.nsPlan("b", "p"); a.MaxRetries != 6 || b.MaxRetries != 4 {
			h.Fatalf("policies a/p %d, b/p %d; want 6 and 4", a.MaxRetries, b.MaxRetries)
		}
	}},
}
