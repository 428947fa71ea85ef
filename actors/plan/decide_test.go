package plan_test

import (
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/plan"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
)

// The limit edges: retry_count 1..max retries, max+1 escalates; max 0
// escalates the first retriable error; non-retriable categories ignore the
// limit.
func TestDecideLimitEdges(t *testing.T) {
	const id = "plan-1"
	tr := plan.ClassificationOf(transient)
	cases := []struct {
		count, max int32
		want       planv1.RecoveryAction
	}{
		{1, 0, escalate},
		{1, 3, retry},
		{3, 3, retry},
		{4, 3, escalate},
		{100, 100, retry},
		{101, 100, escalate},
		{1, 100, retry},
	}
	for _, tc := range cases {
		if got := plan.Decide(tr, id, tc.count, tc.max).Action; got != tc.want {
			t.Errorf("transient, retry_count %d, max %d: %v; want %v", tc.count, tc.max, got, tc.want)
		}
	}
	for _, c := range []planv1.ErrorCategory{auth, resource, merge, validation, strategy, internal, unknown} {
		cl := plan.ClassificationOf(c)
		for _, count := range []int32{1, 4, 1000} {
			if got := plan.Decide(cl, id, count, 3).Action; got != cl.DefaultAction {
				t.Errorf("%v, retry_count %d: %v; want the default %v", c, count, got, cl.DefaultAction)
			}
		}
	}
}

// Hints and commands are fixed per category and name the plan; the revert
// categories (resource, merge conflict, strategy) point at the plan's
// details.
func TestDecideHintsNameThePlan(t *testing.T) {
	const id = "01HXM2A6K1P2E9Q9D4GQ7J4S7Z"
	revertCmd := "node plan details --plan " + id
	for _, c := range []planv1.ErrorCategory{resource, merge, strategy} {
		d := plan.Decide(plan.ClassificationOf(c), id, 1, 3)
		if d.Action != revert || d.Command != revertCmd {
			t.Errorf("%v: %v %q; want revert_to_strategize %q", c, d.Action, d.Command, revertCmd)
		}
	}
	for _, r := range plan.Table() {
		a := plan.Decide(r.Classification, id, 1, 3)
		b := plan.Decide(r.Classification, id, 1, 3)
		if a != b {
			t.Fatalf("%v: not deterministic: %+v vs %+v", r.Category, a, b)
		}
		if !strings.Contains(a.Hint, id) || !strings.Contains(a.Command, id) || strings.Contains(a.Hint, "{plan_id}") {
			t.Errorf("%v: hint %q / command %q must name the plan", r.Category, a.Hint, a.Command)
		}
	}
	ex := plan.Decide(plan.ClassificationOf(tool), id, 4, 3)
	if ex.Action != escalate || !strings.Contains(ex.Hint, "exhausted") || !strings.Contains(ex.Hint, "node plan history --plan "+id) {
		t.Errorf("exhausted retries: %+v", ex)
	}
	if d := plan.Decide(plan.ClassificationOf(auth), id, 1, 3); d.Command != "node plan history --plan "+id {
		t.Errorf("auth command %q", d.Command)
	}
}
