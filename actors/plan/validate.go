package plan

import (
	"unicode"
	"unicode/utf8"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/jsonobj"
	"github.com/agentstate/agentstate/persistence"
)

// Input limits. Every violation is INVALID_ARGUMENT naming the field.
const (
	// MaxNameBytes bounds step_id, error_type, tool and actor_name.
	MaxNameBytes = 256
	// DefaultMaxMessageBytes bounds message, stack_summary,
	// attributes_json and a merged details_json unless Config says
	// otherwise.
	DefaultMaxMessageBytes = 64 << 10
	// MaxPolicyRetries is the largest max_retries a policy may set.
	MaxPolicyRetries = 100
	// DefaultHistoryLimit and MaxHistoryLimit bound a History page.
	DefaultHistoryLimit = 100
	MaxHistoryLimit     = 1000
)

func checkPhase(field string, p planv1.Phase, allowUnspecified bool) error {
	if p == planv1.Phase_PHASE_UNSPECIFIED && allowUnspecified {
		return nil
	}
	if p < planv1.Phase_PHASE_ACTION || p > planv1.Phase_PHASE_APPLY {
		return errs.InvalidArgument("%s %d is not one of action, strategize, execute, apply", field, p)
	}
	return nil
}

// checkName bounds a short identifier-like field: UTF-8, no control
// characters, at most MaxNameBytes; required fields must be non-empty.
func checkName(field, s string, required bool) error {
	if s == "" {
		if required {
			return errs.InvalidArgument("%s is empty", field)
		}
		return nil
	}
	if len(s) > MaxNameBytes {
		return errs.InvalidArgument("%s is %d bytes; at most %d allowed", field, len(s), MaxNameBytes)
	}
	if !utf8.ValidString(s) {
		return errs.InvalidArgument("%s is not valid UTF-8", field)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return errs.InvalidArgument("%s %q contains a control character", field, clip(s))
		}
	}
	return nil
}

// checkText bounds a free-text field: UTF-8, at most max bytes.
func checkText(field, s string, max int) error {
	if len(s) > max {
		return errs.InvalidArgument("%s is %d bytes; at most %d allowed", field, len(s), max)
	}
	if !utf8.ValidString(s) {
		return errs.InvalidArgument("%s is not valid UTF-8", field)
	}
	return nil
}

// validateRecordError checks r and returns it with attributes_json
// normalized. r itself is not modified.
func validateRecordError(r *planv1.RecordErrorRequest, maxBytes int) (*planv1.RecordErrorRequest, error) {
	if err := ids.CheckPlanID("plan_id", r.GetPlanId()); err != nil {
		return nil, err
	}
	if id := r.GetRecordId(); id != "" {
		if err := ids.Check("record_id", id); err != nil {
			return nil, err
		}
	}
	if err := checkPhase("phase", r.GetPhase(), false); err != nil {
		return nil, err
	}
	if err := checkName("step_id", r.GetStepId(), false); err != nil {
		return nil, err
	}
	if err := checkName("error_type", r.GetErrorType(), true); err != nil {
		return nil, err
	}
	if err := checkName("tool", r.GetTool(), false); err != nil {
		return nil, err
	}
	if err := checkName("actor_name", r.GetActorName(), false); err != nil {
		return nil, err
	}
	if err := checkText("message", r.GetMessage(), maxBytes); err != nil {
		return nil, err
	}
	if err := checkText("stack_summary", r.GetStackSummary(), maxBytes); err != nil {
		return nil, err
	}
	if err := checkText("attributes_json", r.GetAttributesJson(), maxBytes); err != nil {
		return nil, err
	}
	attrs, err := jsonobj.Normalize("attributes_json", r.GetAttributesJson())
	if err != nil {
		return nil, err
	}
	v := &planv1.RecordErrorRequest{
		PlanId: r.GetPlanId(), Phase: r.GetPhase(), StepId: r.GetStepId(), ErrorType: r.GetErrorType(),
		Message: r.GetMessage(), Tool: r.GetTool(), ActorName: r.GetActorName(),
		StackSummary: r.GetStackSummary(), AttributesJson: attrs, RecordId: r.GetRecordId(),
	}
	return v, nil
}

func validateSetPolicy(r *planv1.SetPolicyRequest) error {
	if err := ids.CheckPlanID("plan_id", r.GetPlanId()); err != nil {
		return err
	}
	if n := r.GetMaxRetries(); n < 0 || n > MaxPolicyRetries {
		return errs.InvalidArgument("max_retries %d is outside 0..%d", n, MaxPolicyRetries)
	}
	return nil
}

func validateRecordSuccess(r *planv1.RecordSuccessRequest) error {
	if err := ids.CheckPlanID("plan_id", r.GetPlanId()); err != nil {
		return err
	}
	if err := checkPhase("phase", r.GetPhase(), false); err != nil {
		return err
	}
	return checkName("step_id", r.GetStepId(), false)
}

// historyQuery validates r and returns its filter with the limit defaulted
// (0 → DefaultHistoryLimit) and clamped to MaxHistoryLimit.
func historyQuery(r *planv1.HistoryRequest) (persistence.PlanFilter, error) {
	if err := ids.CheckPlanID("plan_id", r.GetPlanId()); err != nil {
		return persistence.PlanFilter{}, err
	}
	if err := ids.CheckNamespace("namespace", r.GetNamespace()); err != nil {
		return persistence.PlanFilter{}, err
	}
	if err := checkPhase("phase", r.GetPhase(), true); err != nil {
		return persistence.PlanFilter{}, err
	}
	if c := r.GetCategory(); c < 0 || c > planv1.ErrorCategory_ERROR_CATEGORY_UNKNOWN {
		return persistence.PlanFilter{}, errs.InvalidArgument("category %d is not an error category", c)
	}
	if r.GetFromSequence() < 0 {
		return persistence.PlanFilter{}, errs.InvalidArgument("from_sequence %d is negative", r.GetFromSequence())
	}
	limit := int(r.GetLimit())
	switch {
	case limit < 0:
		return persistence.PlanFilter{}, errs.InvalidArgument("limit %d is negative", limit)
	case limit == 0:
		limit = DefaultHistoryLimit
	case limit > MaxHistoryLimit:
		limit = MaxHistoryLimit
	}
	return persistence.PlanFilter{
		Namespace: persistence.PlanNamespace(r.GetNamespace()), PlanID: r.GetPlanId(), Phase: r.GetPhase(), Category: r.GetCategory(),
		FromSequence: r.GetFromSequence(), Limit: limit,
	}, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
