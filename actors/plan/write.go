package plan

import (
	"encoding/json"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

// Bounds on one coalesced write: a plan actor carries at most this many
// queued requests, or roughly this many bytes, in one PlanWrite, so that one
// busy plan cannot make a transaction arbitrarily large.
const (
	maxOpsPerWrite   = 1024
	maxBytesPerWrite = 8 << 20
)

// writeOf builds the one PlanWrite that stores ops (whose outcomes were
// computed in order, starting from committed) together with one audit entry
// per state change. committed itself is not changed.
func writeOf(ns, planID string, committed *state, ops []*op, now time.Time) (*persistence.PlanWrite, error) {
	w := &persistence.PlanWrite{Namespace: ns, PlanID: planID}
	stepAt := map[stepKey]int{}
	setStep := func(k stepKey, count int32) {
		if i, ok := stepAt[k]; ok {
			w.StepRetries[i].Count = count
			return
		}
		stepAt[k] = len(w.StepRetries)
		w.StepRetries = append(w.StepRetries, persistence.StepRetry{Phase: k.phase, StepID: k.step, Count: count})
	}
	var (
		foreign  map[string]json.RawMessage // nil until a merge
		recovery = committed.recovery
		touched  bool
	)
	for _, o := range ops {
		var (
			event   string
			actor   string
			details any
		)
		switch o.kind {
		case opRecordError:
			w.Records = append(w.Records, o.record)
			setStep(o.step, o.stepCount)
			recovery, touched = o.recovery, true
			r := o.record
			event, actor = audit.EventPlanErrorRecorded, r.GetActorName()
			details = errorAudit{
				RecordID: r.GetRecordId(), Sequence: r.GetSequence(), Phase: PhaseName(r.GetPhase()),
				StepID: r.GetStepId(), ErrorType: r.GetErrorType(), Tool: r.GetTool(),
				Category: CategoryName(r.GetCategory()), RetryCount: r.GetRetryCount(),
				MaxRetries: r.GetMaxRetries(), RecoveryAction: ActionName(r.GetRecoveryAction()),
			}
		case opSetPolicy:
			p := o.policy
			w.MaxRetries = &p
			event, details = audit.EventPlanPolicySet, map[string]int32{"max_retries": p}
		case opRecordSuccess:
			setStep(o.step, 0)
			event = audit.EventPlanRetryReset
			details = resetAudit{Phase: PhaseName(o.step.phase), StepID: o.step.step, PreviousRetryCount: o.prevCount}
		case opMergeDetails:
			if foreign == nil {
				foreign = make(map[string]json.RawMessage, len(committed.foreign)+len(o.merge))
				for k, v := range committed.foreign {
					foreign[k] = v
				}
			}
			for k, v := range o.merge {
				foreign[k] = v
			}
			touched = true
			// Other writers' keys are theirs to audit; the merge itself
			// changes no recovery state, so it has no event of its own.
			continue
		}
		raw, err := json.Marshal(details)
		if err != nil {
			return nil, errs.Internal("plan %s: audit details: %v", planID, err)
		}
		// The details are this package's own structs, marshaled: compact,
		// and with no secret key (TestOwnAuditDetailsNeedNoMasking).
		e, err := audit.NewOwnEntry(&auditv1.RecordRequest{
			EventType: event, PlanId: planID, ActorName: actor, DetailsJson: string(raw),
		}, now)
		if err != nil {
			return nil, errs.Internal("plan %s: audit entry: %v", planID, err)
		}
		// The entry belongs to the plan's namespace: its readers see it.
		e.Principal, e.Namespace = o.principal(), ns
		w.Audit = append(w.Audit, e)
	}
	if touched {
		if foreign == nil {
			foreign = committed.foreign
		}
		w.ErrorDetailsJSON = joinDetails(foreign, recovery)
	}
	return w, nil
}

// errorAudit is the details of a plan_error_recorded entry.
type errorAudit struct {
	RecordID       string `json:"record_id"`
	Sequence       int64  `json:"sequence"`
	Phase          string `json:"phase"`
	StepID         string `json:"step_id"`
	ErrorType      string `json:"error_type"`
	Tool           string `json:"tool,omitempty"`
	Category       string `json:"category"`
	RetryCount     int32  `json:"retry_count"`
	MaxRetries     int32  `json:"max_retries"`
	RecoveryAction string `json:"recovery_action"`
}

// resetAudit is the details of a plan_retry_reset entry.
type resetAudit struct {
	Phase              string `json:"phase"`
	StepID             string `json:"step_id"`
	PreviousRetryCount int32  `json:"previous_retry_count"`
}

// response is what o's caller gets once o committed.
func (o *op) response() proto.Message {
	switch o.kind {
	case opRecordError:
		return &planv1.RecordErrorResponse{Record: o.record}
	case opSetPolicy:
		return &planv1.SetPolicyResponse{PlanId: o.planID, MaxRetries: o.policy}
	case opRecordSuccess:
		return &planv1.RecordSuccessResponse{PreviousRetryCount: o.prevCount}
	default:
		return &planv1.MergeErrorDetailsResponse{DetailsJson: o.details}
	}
}
