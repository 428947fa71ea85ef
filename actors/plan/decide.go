package plan

import (
	"strings"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/persistence"
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

// InNamespace is d for a plan of namespace ns: the commands it names
// reach the plan only with the namespace, so outside the default one
// each `--plan` gains `--namespace ns` (quoted for a shell when it needs
// to be).
func (d Decision) InNamespace(ns string) Decision {
	if ns == "" || ns == persistence.DefaultNamespace {
		return d
	}
	flag := "--namespace " + shellWord(ns) + " --plan "
	d.Hint = strings.ReplaceAll(d.Hint, "--plan ", flag)
	d.Command = strings.ReplaceAll(d.Command, "--plan ", flag)
	return d
}

// shellWord is s as one POSIX shell word.
func shellWord(s string) string {
	plain := s != ""
	for i := 0; plain && i < len(s); i++ {
		c := s[i]
		plain = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._:-/@+=,", c) >= 0
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
