package plan

import (
	"strings"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
)

// Decision is the recovery advice for one recorded error.
type Decision struct {
	Action  planv1.RecoveryAction
	Hint    string
	Command string
}

// Decide applies the decision rule to an error of class c, the retryCount-th
// error of its step since the step's last success (1 for the first), in a
// plan whose limit is maxRetries:
//
//   - retriable and retryCount <= maxRetries: RETRY;
//   - retriable and retryCount > maxRetries: ESCALATE (retries exhausted);
//   - not retriable: the category's default action.
//
// So maxRetries = 0 escalates the first retriable error, and maxRetries = 3
// allows three retries: the fourth error of the step escalates.
func Decide(c Classification, planID string, retryCount, maxRetries int32) Decision {
	if c.Retriable && retryCount > maxRetries {
		return Decision{
			Action:  planv1.RecoveryAction_RECOVERY_ACTION_ESCALATE,
			Hint:    render(exhaustedHint, planID),
			Command: render(exhaustedCommand, planID),
		}
	}
	return Decision{
		Action:  c.DefaultAction,
		Hint:    render(c.HintTemplate, planID),
		Command: render(c.CommandTemplate, planID),
	}
}

func render(template, planID string) string {
	return strings.ReplaceAll(template, "{plan_id}", planID)
}
