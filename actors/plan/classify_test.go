package plan_test

import (
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/plan"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
)

const (
	transient  = planv1.ErrorCategory_ERROR_CATEGORY_TRANSIENT
	auth       = planv1.ErrorCategory_ERROR_CATEGORY_AUTH
	resource   = planv1.ErrorCategory_ERROR_CATEGORY_RESOURCE
	merge      = planv1.ErrorCategory_ERROR_CATEGORY_MERGE_CONFLICT
	validation = planv1.ErrorCategory_ERROR_CATEGORY_VALIDATION
	tool       = planv1.ErrorCategory_ERROR_CATEGORY_TOOL
	strategy   = planv1.ErrorCategory_ERROR_CATEGORY_STRATEGY_CONSTRAINT
	internal   = planv1.ErrorCategory_ERROR_CATEGORY_INTERNAL
	unknown    = planv1.ErrorCategory_ERROR_CATEGORY_UNKNOWN

	retry    = planv1.RecoveryAction_RECOVERY_ACTION_RETRY
	revert   = planv1.RecoveryAction_RECOVERY_ACTION_REVERT_TO_STRATEGIZE
	prompt   = planv1.RecoveryAction_RECOVERY_ACTION_PROMPT
	escalate = planv1.RecoveryAction_RECOVERY_ACTION_ESCALATE
	abort    = planv1.RecoveryAction_RECOVERY_ACTION_ABORT
)

// Every category, selected by its error_type and by a message alone, with
// the retriability and default action the table documents.
func TestClassifyEveryCategory(t *testing.T) {
	cases := []struct {
		errorType, message string
		category           planv1.ErrorCategory
		retriable          bool
		action             planv1.RecoveryAction
	}{
		{"timeout", "", transient, true, retry},
		{"asyncio.TimeoutError", "", transient, true, retry},
		{"RateLimitError", "", transient, true, retry},
		{"rate_limit", "", transient, true, retry},
		{"ConnectionResetError", "", transient, true, retry},
		{"network", "", transient, true, retry},
		{"ServiceUnavailable", "", transient, true, retry},
		{"RuntimeError", "upstream timed out after 30s", transient, true, retry},
		{"AuthenticationError", "", auth, false, prompt},
		{"PermissionError", "", auth, false, prompt},
		{"Exception", "HTTP 401 Unauthorized", auth, false, prompt},
		{"FileNotFoundError", "", resource, false, revert},
		{"ResourceExhausted", "", resource, false, revert},
		{"OSError", "No space left on device", resource, false, revert},
		{"MergeConflict", "", merge, false, revert},
		{"GitError", "Merge conflict in main.go", merge, false, revert},
		{"ValidationError", "", validation, false, prompt},
		{"ValueError", "", validation, false, prompt},
		{"Exception", "field name is required", validation, false, prompt},
		{"ToolError", "", tool, true, retry},
		{"subprocess.CalledProcessError", "", tool, true, retry},
		{"Exception", "pytest returned exit status 1", tool, true, retry},
		{"StrategyConstraint", "", strategy, false, revert},
		{"Infeasible", "", strategy, false, revert},
		{"PlanError", "no strategy can satisfy: unsatisfiable requirements", strategy, false, revert},
		{"AssertionError", "", internal, false, abort},
		{"KeyError", "", internal, false, abort},
		{"Exception", "panic: runtime error", internal, false, abort},
		{"Exception", "something odd happened", unknown, false, escalate},
		{"WeirdThing", "", unknown, false, escalate},
		{"", "", unknown, false, escalate},
	}
	for _, tc := range cases {
		c := plan.Classify(tc.errorType, tc.message)
		if c.Category != tc.category || c.Retriable != tc.retriable || c.DefaultAction != tc.action {
			t.Errorf("Classify(%q, %q) = %v retriable=%v %v; want %v %v %v", tc.errorType, tc.message,
				c.Category, c.Retriable, c.DefaultAction, tc.category, tc.retriable, tc.action)
		}
	}
}

// The error_type decides before the message does.
func TestClassifyTypeBeatsMessage(t *testing.T) {
	if c := plan.Classify("ValidationError", "connection timed out"); c.Category != validation {
		t.Fatalf("got %v; the error_type must win over the message", c.Category)
	}
	// Message rows are tried in table order: transient before validation.
	if c := plan.Classify("Exception", "invalid response: timed out"); c.Category != transient {
		t.Fatalf("got %v; want the first matching row (transient)", c.Category)
	}
}

func TestNormalizeErrorType(t *testing.T) {
	for in, want := range map[string]string{
		"asyncio.TimeoutError":          "timeout",
		"Timeout-Error":                 "timeout",
		"TIMEOUT":                       "timeout",
		"requests::ConnectionError":     "connection",
		"pkg/errors.RateLimitException": "ratelimit",
		"Error":                         "error",
		"rate_limit":                    "ratelimit",
		"trailing.dot.":                 "dot",
	} {
		if got := plan.NormalizeErrorType(in); got != want {
			t.Errorf("NormalizeErrorType(%q) = %q; want %q", in, got, want)
		}
	}
}

// The table has one row per category, each type in one row, and rows agree
// with Classify and ClassificationOf.
func TestTableIsComplete(t *testing.T) {
	rows := plan.Table()
	seen := map[planv1.ErrorCategory]bool{}
	for _, r := range rows {
		if seen[r.Category] {
			t.Fatalf("category %v has two rows", r.Category)
		}
		seen[r.Category] = true
		if got := plan.ClassificationOf(r.Category); got != r.Classification {
			t.Errorf("ClassificationOf(%v) = %+v; want %+v", r.Category, got, r.Classification)
		}
		for _, et := range r.ErrorTypes {
			if got := plan.Classify(et, "").Category; got != r.Category {
				t.Errorf("type %q classifies as %v; its row is %v", et, got, r.Category)
			}
		}
		for _, p := range r.MessagePatterns {
			if p != strings.ToLower(p) {
				t.Errorf("pattern %q is not lower-case", p)
			}
		}
		if !strings.Contains(r.HintTemplate, "{plan_id}") || !strings.Contains(r.CommandTemplate, "{plan_id}") {
			t.Errorf("row %v: hint and command must name the plan", r.Category)
		}
		if r.Retriable != (r.DefaultAction == retry) {
			t.Errorf("row %v: retriable=%v but default action %v", r.Category, r.Retriable, r.DefaultAction)
		}
	}
	for v := range planv1.ErrorCategory_name {
		c := planv1.ErrorCategory(v)
		if c != planv1.ErrorCategory_ERROR_CATEGORY_UNSPECIFIED && !seen[c] {
			t.Errorf("category %v has no row", c)
		}
	}
	// Table returns a copy: changing it changes nothing.
	rows[0].ErrorTypes[0] = "mutated"
	if plan.Table()[0].ErrorTypes[0] == "mutated" {
		t.Fatal("Table exposes its backing arrays")
	}
}
