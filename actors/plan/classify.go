package plan

import (
	"strings"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
)

// Classification is what the table says about one error category. It is a
// pure function of the category: Classify never varies it per request.
type Classification struct {
	Category planv1.ErrorCategory
	// Retriable errors are retried while the step's retry count is within
	// the plan's limit, and escalated after.
	Retriable bool
	// DefaultAction is the action of a non-retriable error, and of a
	// retriable one within the limit (always RETRY then).
	DefaultAction planv1.RecoveryAction
	// HintTemplate and CommandTemplate name the plan as "{plan_id}".
	HintTemplate    string
	CommandTemplate string
}

// Rule is one row of the classification table: a category, what makes an
// error fall into it, and its Classification.
type Rule struct {
	Classification
	// ErrorTypes are normalized error_type keys (see NormalizeErrorType)
	// that select this category.
	ErrorTypes []string
	// MessagePatterns are lower-case substrings of the message that select
	// this category when the error_type selects none.
	MessagePatterns []string
}

// The commands a hint points at: commands of this project's CLI (bin/node)
// that show what the advice rests on. The actions themselves (re-running a
// step, reverting to strategy, asking a human) are the caller's: agentstate
// records plans' errors, it does not run plans.
const (
	cmdDetails = "node plan details --plan {plan_id}" // retry counts, policy, recovery summary
	cmdHistory = "node plan history --plan {plan_id}" // every error recorded
)

// Escalation after exhausted retries has one hint and command whatever the
// category, because the situation (a human must decide) is the same.
const (
	exhaustedHint    = "retries of this step are exhausted in plan {plan_id}; review them with `node plan history --plan {plan_id}`, then give the plan guidance and resume it"
	exhaustedCommand = cmdHistory
)

// table is the classification table, in message-pattern precedence order:
// when the error_type is not in any row, the first row with a pattern that
// occurs in the message wins. Error types are unique across rows.
var table = []Rule{
	{
		Classification: Classification{
			Category: planv1.ErrorCategory_ERROR_CATEGORY_TRANSIENT, Retriable: true,
			DefaultAction:   planv1.RecoveryAction_RECOVERY_ACTION_RETRY,
			HintTemplate:    "a transient failure (timeout, rate limit, network, unavailable) hit plan {plan_id}; re-run the step (`node plan details --plan {plan_id}` shows its retries against the policy) and record its success with `node plan record-success`",
			CommandTemplate: cmdDetails,
		},
		ErrorTypes: []string{
			"timeout", "timedout", "deadlineexceeded", "readtimeout", "connecttimeout", "apitimeout",
			"ratelimit", "ratelimited", "ratelimitexceeded", "toomanyrequests", "throttled", "throttling",
			"network", "connection", "connectionreset", "connectionrefused", "connectionaborted",
			"apiconnection", "brokenpipe", "dns", "unavailable", "serviceunavailable", "internalserver",
			"temporaryfailure", "transient",
		},
		MessagePatterns: []string{
			"timed out", "timeout", "deadline exceeded", "rate limit", "too many requests",
			"connection reset", "connection refused", "connection aborted", "broken pipe",
			"network is unreachable", "temporarily unavailable", "service unavailable", "try again later",
		},
	},
	{
		Classification: Classification{
			Category:        planv1.ErrorCategory_ERROR_CATEGORY_AUTH,
			DefaultAction:   planv1.RecoveryAction_RECOVERY_ACTION_PROMPT,
			HintTemplate:    "credentials were rejected in plan {plan_id}; fix them, then resume the plan (its errors: `node plan history --plan {plan_id}`)",
			CommandTemplate: cmdHistory,
		},
		ErrorTypes: []string{
			"auth", "authentication", "authorization", "unauthorized", "unauthenticated", "forbidden",
			"permission", "permissiondenied", "accessdenied", "invalidapikey", "apikey", "credentials", "tokenexpired",
		},
		MessagePatterns: []string{
			"unauthorized", "unauthenticated", "forbidden", "permission denied", "access denied",
			"invalid api key", "api key", "authentication", "credential", "token expired",
		},
	},
	{
		Classification: Classification{
			Category:        planv1.ErrorCategory_ERROR_CATEGORY_MERGE_CONFLICT,
			DefaultAction:   planv1.RecoveryAction_RECOVERY_ACTION_REVERT_TO_STRATEGIZE,
			HintTemplate:    "the changes of plan {plan_id} conflict with the project; revert the plan to its strategize phase and plan again (`node plan details --plan {plan_id}` has the error details)",
			CommandTemplate: cmdDetails,
		},
		ErrorTypes: []string{"mergeconflict", "conflict", "merge", "rebaseconflict", "patchconflict", "patchapply"},
		MessagePatterns: []string{
			"merge conflict", "conflict marker", "<<<<<<<", "patch does not apply", "could not apply",
		},
	},
	{
		Classification: Classification{
			Category:        planv1.ErrorCategory_ERROR_CATEGORY_RESOURCE,
			DefaultAction:   planv1.RecoveryAction_RECOVERY_ACTION_REVERT_TO_STRATEGIZE,
			HintTemplate:    "a resource plan {plan_id} needs is missing or exhausted; revert the plan to its strategize phase and plan again (`node plan details --plan {plan_id}` has the error details)",
			CommandTemplate: cmdDetails,
		},
		ErrorTypes: []string{
			"resource", "resourceexhausted", "resourcenotfound", "filenotfound", "notfound",
			"outofmemory", "memory", "diskfull", "nospace", "quota", "quotaexceeded",
			"contextlengthexceeded", "contextwindowexceeded", "tokenlimit",
		},
		MessagePatterns: []string{
			"no space left", "disk full", "out of memory", "quota exceeded", "resource exhausted",
			"no such file", "not found",
		},
	},
	{
		Classification: Classification{
			Category:        planv1.ErrorCategory_ERROR_CATEGORY_STRATEGY_CONSTRAINT,
			DefaultAction:   planv1.RecoveryAction_RECOVERY_ACTION_REVERT_TO_STRATEGIZE,
			HintTemplate:    "the strategy of plan {plan_id} cannot satisfy its constraints; revert the plan to its strategize phase and plan again (`node plan details --plan {plan_id}` has the error details)",
			CommandTemplate: cmdDetails,
		},
		ErrorTypes: []string{
			"strategyconstraint", "strategy", "constraint", "constraintviolation", "infeasible",
			"unsatisfiable", "invariant", "invariantviolation", "planinfeasible",
		},
		MessagePatterns: []string{
			"infeasible", "unresolvable constraint", "cannot satisfy", "unsatisfiable",
			"constraint violat", "invariant violat",
		},
	},
	{
		Classification: Classification{
			Category:        planv1.ErrorCategory_ERROR_CATEGORY_VALIDATION,
			DefaultAction:   planv1.RecoveryAction_RECOVERY_ACTION_PROMPT,
			HintTemplate:    "input was rejected as invalid in plan {plan_id}; give the plan guidance and resume it (its errors: `node plan history --plan {plan_id}`)",
			CommandTemplate: cmdHistory,
		},
		ErrorTypes: []string{
			"validation", "invalid", "invalidargument", "invalidinput", "value", "schema",
			"schemavalidation", "parse", "jsondecode", "syntax", "badrequest", "unprocessableentity",
		},
		MessagePatterns: []string{"validation", "invalid", "schema", "is required", "must be"},
	},
	{
		Classification: Classification{
			Category:        planv1.ErrorCategory_ERROR_CATEGORY_INTERNAL,
			DefaultAction:   planv1.RecoveryAction_RECOVERY_ACTION_ABORT,
			HintTemplate:    "an internal error stopped plan {plan_id}; it cannot continue safely — report it with its errors (`node plan history --plan {plan_id}`)",
			CommandTemplate: cmdHistory,
		},
		ErrorTypes: []string{
			"internal", "assertion", "panic", "nilpointer", "nullpointer", "key", "attribute", "type",
			"index", "zerodivision", "notimplemented", "recursion", "unreachable",
		},
		MessagePatterns: []string{
			"panic:", "assertion failed", "nil pointer", "null pointer", "internal error", "unreachable",
		},
	},
	{
		Classification: Classification{
			Category: planv1.ErrorCategory_ERROR_CATEGORY_TOOL, Retriable: true,
			DefaultAction:   planv1.RecoveryAction_RECOVERY_ACTION_RETRY,
			HintTemplate:    "a tool failed in plan {plan_id}; re-run the step (`node plan details --plan {plan_id}` shows its retries against the policy) and record its success with `node plan record-success`",
			CommandTemplate: cmdDetails,
		},
		ErrorTypes: []string{
			"tool", "toolexecution", "toolfailed", "toolfailure", "toolinvocation", "command",
			"commandfailed", "subprocess", "calledprocess", "nonzeroexit", "exitcode",
		},
		MessagePatterns: []string{"exit status", "exit code", "non-zero exit", "command failed", "tool failed"},
	},
	{
		Classification: Classification{
			Category:        planv1.ErrorCategory_ERROR_CATEGORY_UNKNOWN,
			DefaultAction:   planv1.RecoveryAction_RECOVERY_ACTION_ESCALATE,
			HintTemplate:    "an unclassified error in plan {plan_id} needs a human; review it with `node plan history --plan {plan_id}`, then give the plan guidance and resume it",
			CommandTemplate: cmdHistory,
		},
	},
}

// byType maps a normalized error_type to its row; byCategory a category.
var (
	byType     = map[string]*Rule{}
	byCategory = map[planv1.ErrorCategory]*Rule{}
)

func init() {
	for i := range table {
		r := &table[i]
		byCategory[r.Category] = r
		for _, t := range r.ErrorTypes {
			if _, dup := byType[t]; dup {
				panic("plan: error type " + t + " is in two rows of the classification table")
			}
			byType[t] = r
		}
	}
}

// Table returns a copy of the classification table, one Rule per category,
// in message-pattern precedence order.
func Table() []Rule {
	out := make([]Rule, len(table))
	for i, r := range table {
		out[i] = r
		out[i].ErrorTypes = append([]string(nil), r.ErrorTypes...)
		out[i].MessagePatterns = append([]string(nil), r.MessagePatterns...)
	}
	return out
}

// ClassificationOf returns the table's row for category c; UNSPECIFIED and
// unknown values give the UNKNOWN row.
func ClassificationOf(c planv1.ErrorCategory) Classification {
	if r, ok := byCategory[c]; ok {
		return r.Classification
	}
	return byCategory[planv1.ErrorCategory_ERROR_CATEGORY_UNKNOWN].Classification
}

// Classify maps an error to its category, deterministically:
//
//  1. the normalized error_type (NormalizeErrorType) is looked up in the
//     rows' ErrorTypes;
//  2. otherwise the lower-cased message is searched for each row's
//     MessagePatterns, rows in table order, and the first hit wins;
//  3. otherwise the error is UNKNOWN.
//
// Generic types (RuntimeError, Exception, HTTPError) are deliberately in no
// row, so their message decides.
func Classify(errorType, message string) Classification {
	if r, ok := byType[NormalizeErrorType(errorType)]; ok {
		return r.Classification
	}
	msg := strings.ToLower(message)
	for i := range table {
		for _, p := range table[i].MessagePatterns {
			if strings.Contains(msg, p) {
				return table[i].Classification
			}
		}
	}
	return byCategory[planv1.ErrorCategory_ERROR_CATEGORY_UNKNOWN].Classification
}

// NormalizeErrorType reduces an error type name to a table key: the last
// component of a qualified name (after '.', ':' or '/'), lower-cased, with
// everything but letters and digits removed and a trailing "error" or
// "exception" dropped. So "asyncio.TimeoutError", "timeout", "Timeout-Error"
// and "TIMEOUT" all become "timeout".
func NormalizeErrorType(t string) string {
	if i := strings.LastIndexAny(strings.TrimRight(t, ".:/ "), ".:/"); i >= 0 {
		t = t[i+1:]
	}
	var b strings.Builder
	for _, c := range strings.ToLower(t) {
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') {
			b.WriteRune(c)
		}
	}
	k := b.String()
	for _, suffix := range []string{"exception", "error"} {
		if len(k) > len(suffix) && strings.HasSuffix(k, suffix) {
			return strings.TrimSuffix(k, suffix)
		}
	}
	return k
}
