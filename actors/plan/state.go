package plan

import (
	"encoding/json"
	"time"

	"github.com/agentstate/agentstate/actors/lifecycle"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type stepKey struct {
	phase planv1.Phase
	step  string
}

// state is one plan as its actor sees it. The actor keeps two: committed
// (what the store holds) and working (committed plus every accepted,
// unanswered request, in arrival order).
//
// Invariants: nextSeq is one past the highest sequence (0 for a plan
// without records); steps[k] is the number of errors recorded for k since
// its last success; foreign never holds a recovery key.
type state struct {
	maxRetries int32
	nextSeq    int64
	steps      map[stepKey]int32
	foreign    map[string]json.RawMessage
	recovery   *planv1.ErrorDetails // the latest error's summary; nil before any
}

func freshState() *state {
	return &state{
		maxRetries: persistence.DefaultMaxRetries,
		steps:      map[stepKey]int32{},
		foreign:    map[string]json.RawMessage{},
	}
}

func loadedState(ps *persistence.PlanState) (*state, error) {
	foreign, rec, err := splitDetails(ps.ErrorDetailsJSON)
	if err != nil {
		return nil, err
	}
	s := &state{
		maxRetries: ps.MaxRetries,
		nextSeq:    ps.NextSequence,
		steps:      make(map[stepKey]int32, len(ps.StepRetries)),
		foreign:    foreign,
		recovery:   rec,
	}
	for _, r := range ps.StepRetries {
		s.steps[stepKey{r.Phase, r.StepID}] = r.Count
	}
	return s, nil
}

func (s *state) clone() *state {
	c := *s
	c.steps = make(map[stepKey]int32, len(s.steps))
	for k, v := range s.steps {
		c.steps[k] = v
	}
	c.foreign = make(map[string]json.RawMessage, len(s.foreign))
	for k, v := range s.foreign {
		c.foreign[k] = v
	}
	return &c
}

type opKind int

const (
	opRecordError opKind = iota
	opSetPolicy
	opRecordSuccess
	opMergeDetails
)

// op is one accepted write request. Its inputs (req and the identity fields
// recordID, recordedAt) are fixed when it is accepted; its outcome (the
// fields below "outcome") is computed by state.apply against the state it
// follows, and recomputed if that state is rolled back before it is sent.
type op struct {
	kind       opKind
	ns         string // the plan's namespace, never ""
	planID     string
	recordErr  *planv1.RecordErrorRequest // validated and normalized
	policy     int32
	step       stepKey
	merge      map[string]json.RawMessage
	recordID   string
	recordedAt time.Time
	req        *lifecycle.Request
	// followers are retries of the same client record id that arrived
	// while this op was unanswered; they get its outcome (retry.go).
	followers []*lifecycle.Request

	// outcome
	record    *planv1.ErrorRecord  // opRecordError
	recovery  *planv1.ErrorDetails // opRecordError
	stepCount int32                // opRecordError, opRecordSuccess: the step's count after
	prevCount int32                // opRecordSuccess: the count before the reset
	details   string               // opMergeDetails: the merged object after
}

// principal is who sent the op's request (its audit entry names it).
func (o *op) principal() string {
	if o.req == nil {
		return ""
	}
	return o.req.Principal
}

// apply computes o's outcome against s and then advances s by it.
func (s *state) apply(o *op) {
	switch o.kind {
	case opRecordError:
		r := o.recordErr
		count := s.steps[o.step] + 1
		class := Classify(r.GetErrorType(), r.GetMessage())
		d := Decide(class, o.planID, count, s.maxRetries).InNamespace(o.ns)
		o.stepCount = count
		o.record = &planv1.ErrorRecord{
			RecordId: o.recordID, Namespace: o.ns, PlanId: o.planID, Sequence: s.nextSeq,
			Phase: r.GetPhase(), StepId: r.GetStepId(), ErrorType: r.GetErrorType(),
			Message: r.GetMessage(), Tool: r.GetTool(), ActorName: r.GetActorName(),
			StackSummary: r.GetStackSummary(), AttributesJson: r.GetAttributesJson(),
			Category: class.Category, IsRetriable: class.Retriable,
			RetryCount: count, MaxRetries: s.maxRetries,
			RecoveryAction: d.Action, RecoveryHint: d.Hint, RecoveryCommand: d.Command,
			RecordedAt: timestamppb.New(o.recordedAt),
		}
		o.recovery = &planv1.ErrorDetails{
			ErrorCategory: class.Category, ErrorPhase: r.GetPhase(),
			RetryCount: count, MaxRetries: s.maxRetries, IsRetriable: class.Retriable,
			RecoveryAction: d.Action, RecoveryHint: d.Hint, RecoveryCommand: d.Command,
		}
	case opRecordSuccess:
		o.prevCount = s.steps[o.step]
		o.stepCount = 0
	case opMergeDetails:
		merged := make(map[string]json.RawMessage, len(s.foreign)+len(o.merge))
		for k, v := range s.foreign {
			merged[k] = v
		}
		for k, v := range o.merge {
			merged[k] = v
		}
		o.details = joinDetails(merged, s.recovery)
	}
	s.advance(o)
}

// advance changes s by o's already computed outcome. On the state o was
// computed against, apply and advance agree; the actor uses advance to move
// committed forward once o's write committed.
func (s *state) advance(o *op) {
	switch o.kind {
	case opRecordError:
		s.nextSeq = o.record.GetSequence() + 1
		s.steps[o.step] = o.stepCount
		s.recovery = o.recovery
	case opSetPolicy:
		s.maxRetries = o.policy
	case opRecordSuccess:
		s.steps[o.step] = 0
	case opMergeDetails:
		for k, v := range o.merge {
			s.foreign[k] = v
		}
	}
}
