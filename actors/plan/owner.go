package plan

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/lifecycle"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
)

// owner is the plan's domain in the owner kernel (actors/lifecycle): the
// only code that assigns the plan's sequences and changes its retry
// counters, policy and error_details. The kernel holds the lifecycle (the
// epoch and fencing, the one PlanWrite in flight, arrival order,
// coalescing, passivation); the actor shell (directory.OwnerSpec) carries
// out its effects.
//
// The plan's sequence strategy, in one place: a request's outcome, its
// sequence included, is decided when it is accepted (Accept:
// working.apply), in arrival order, against working; the write that
// carries it commits it (persistence: PlanWrite), and committed advances
// only then.
//
// Invariants:
//   - working == committed advanced by the in-flight write's ops, then the
//     queued ops (Rebase restores it whenever committed changes under
//     them);
//   - a request is answered only after the write carrying it committed, or
//     with the error that rolled it back; so replies, like sequences, are in
//     arrival order, and an acknowledged record is durable. The exception
//     is a retry of a committed record (retry.go): it is answered with that
//     record as soon as the actor or the store knows it.
type owner struct {
	// key is the plan's persistence.PlanKey, its identity as an owner
	// (routing, fencing); ns and planID are what it names.
	key, ns, planID string
	env             *env

	committed *state
	working   *state

	// Client record ids this activation knows (retry.go): byRecord maps
	// the id of each unanswered RecordError that named one to its op;
	// recent holds the latest committed such records.
	byRecord map[string]*op
	recent   recent

	ans *lifecycle.Answers // where the call being served answers
}

var _ lifecycle.Domain = (*owner)(nil)

// env is what every owner of one Service shares; read-only after Start
// except for the owner spec's counters.
type env struct {
	reader persistence.Reader
	cfg    Config
	owners *directory.OwnerSpec
}

func newOwner(key string, e *env) *owner {
	ns, planID := persistence.SplitPlanKey(key)
	return &owner{key: key, ns: ns, planID: planID, env: e}
}

func (o *owner) Describe() (string, string) { return "plan", o.key }

// Activate: see fencing.go.
func (o *owner) Activate() persistence.Command {
	return &persistence.Activate{Kind: persistence.OwnerPlan, ID: o.key}
}

// Load reads the plan's committed state: after the activation (so it
// includes every write of earlier owners that can ever commit), and again
// when a write says memory and store disagree. The kernel rebases working
// on it.
func (o *owner) Load() error {
	lctx, cancel := context.WithTimeout(context.Background(), o.env.cfg.AskTimeout)
	defer cancel()
	ps, err := o.env.reader.GetPlan(lctx, o.ns, o.planID)
	var s *state
	switch {
	case errors.Is(err, errs.ErrNotFound):
		s, err = freshState(), nil
	case err == nil:
		s, err = loadedState(ps)
	}
	if err != nil {
		return err
	}
	o.committed = s
	return nil
}

// Accept validates one request and computes its outcome against the
// working state, so its sequence is assigned now, in arrival order.
func (o *owner) Accept(r *lifecycle.Request, a *lifecycle.Answers) bool {
	o.ans = a
	op, err := o.opOf(r)
	if err != nil {
		a.Reply(r, nil, err)
		return false
	}
	if o.retried(op) {
		return false
	}
	o.working.apply(op)
	r.Value = op
	return true
}

func (o *owner) opOf(r *lifecycle.Request) (*op, error) {
	// Routing keys a request by its plan: one naming another reached
	// this owner by mistake, and is not this plan's to store.
	if m, ok := r.Msg.(planRequest); ok && persistence.PlanKey(m.GetNamespace(), m.GetPlanId()) != o.key {
		return nil, errs.InvalidArgument("plan %s: a request for plan %q of namespace %q reached it", o.key, m.GetPlanId(), m.GetNamespace())
	}
	maxBytes := o.env.cfg.MaxMessageBytes
	switch m := r.Msg.(type) {
	case *planv1.RecordErrorRequest:
		rr, err := validateRecordError(m, maxBytes)
		if err != nil {
			return nil, err
		}
		id := rr.GetRecordId()
		if id == "" {
			id = ids.New()
		}
		return &op{
			kind: opRecordError, ns: o.ns, planID: o.planID, recordErr: rr, req: r,
			step: stepKey{rr.GetPhase(), rr.GetStepId()}, recordID: id, recordedAt: time.Now(),
		}, nil
	case *planv1.SetPolicyRequest:
		if err := validateSetPolicy(m); err != nil {
			return nil, err
		}
		return &op{kind: opSetPolicy, ns: o.ns, planID: o.planID, policy: m.GetMaxRetries(), req: r}, nil
	case *planv1.RecordSuccessRequest:
		if err := validateRecordSuccess(m); err != nil {
			return nil, err
		}
		return &op{kind: opRecordSuccess, ns: o.ns, planID: o.planID, step: stepKey{m.GetPhase(), m.GetStepId()}, req: r}, nil
	case *planv1.MergeErrorDetailsRequest:
		if err := ids.CheckPlanID("plan_id", m.GetPlanId()); err != nil {
			return nil, err
		}
		add, err := parseForeign(m.GetDetailsJson(), maxBytes)
		if err != nil {
			return nil, err
		}
		if err := o.checkDetailsSize(add); err != nil {
			return nil, err
		}
		return &op{kind: opMergeDetails, ns: o.ns, planID: o.planID, merge: add, req: r}, nil
	default:
		return nil, errs.InvalidArgument("a plan actor cannot serve %T", r.Msg)
	}
}

// checkDetailsSize refuses a merge that would grow the other writers' part
// of error_details, as stored (foreignBytes), beyond Config.MaxMessageBytes
// times four.
func (o *owner) checkDetailsSize(add map[string]json.RawMessage) error {
	size := foreignBytes(o.working.foreign, add)
	if max := o.env.cfg.maxDetailsBytes(); size > max {
		return errs.InvalidArgument("error_details of plan %s: the other writers' keys would take %d bytes after the merge; at most %d allowed", o.planID, size, max)
	}
	return nil
}

// Batching: every plan request may share a PlanWrite.
func (o *owner) Batching(r *lifecycle.Request) (lifecycle.Batching, int) {
	return lifecycle.Batched, r.Value.(*op).size()
}

func (o *owner) Limits() (int, int) { return maxOpsPerWrite, maxBytesPerWrite }

func opsOf(rs []*lifecycle.Request) []*op {
	ops := make([]*op, len(rs))
	for i, r := range rs {
		ops[i] = r.Value.(*op)
	}
	return ops
}

// Decide builds the one PlanWrite of run, whose outcomes were computed on
// Accept.
func (o *owner) Decide(run []*lifecycle.Request, epoch int64, a *lifecycle.Answers) *lifecycle.Write {
	o.ans = a
	ops := opsOf(run)
	w, err := writeOf(o.ns, o.planID, o.committed, ops, time.Now())
	if err != nil {
		// Only a bug gets here; the run fails and the kernel rebases
		// the rest.
		o.fail(ops, err)
		return nil
	}
	w.Epoch = epoch
	return &lifecycle.Write{Cmd: w, Carried: run}
}

// Applied ends the write in flight: on commit, committed advances by its
// ops and they are answered; on failure, exactly its ops fail and the
// queued ones are recomputed from the last committed state (reloaded
// first when the failure leaves it in doubt: mayDisagree).
func (o *owner) Applied(w *lifecycle.Write, res persistence.Result, a *lifecycle.Answers) lifecycle.Outcome {
	o.ans = a
	ops := opsOf(w.Carried)
	var exist *persistence.RecordsExistError
	switch err := res.Err; {
	case errors.As(err, &exist):
		return o.recordsExist(w.Carried, exist)
	case err != nil:
		o.fail(ops, err)
		return lifecycle.Outcome{Stale: mayDisagree(err), Rebase: true}
	}
	for _, op := range ops {
		o.committed.advance(op)
		o.answer(op, op.response(), nil)
	}
	return lifecycle.Outcome{}
}

// Refuse answers a queued op and the retries that follow it.
func (o *owner) Refuse(r *lifecycle.Request, err error, a *lifecycle.Answers) {
	o.ans = a
	o.answer(r.Value.(*op), nil, err)
}

// Rebase rebuilds working from committed and recomputes the outcome of
// every queued (unanswered, unsent) request against it.
func (o *owner) Rebase(queue []*lifecycle.Request) {
	o.working = o.committed.clone()
	for _, r := range queue {
		o.working.apply(r.Value.(*op))
	}
}

// Owns: a plan exists as soon as something is recorded for it; its owner
// passivates for idleness only.
func (o *owner) Owns() bool { return true }

// mayDisagree reports whether a failed write's error says that committed
// is not, or may not be, what the store holds: a sequence is taken
// (FAILED_PRECONDITION), the store found a bug (INTERNAL), or the write
// may have committed after all (OUTCOME_UNKNOWN: COMMIT's answer was
// lost). Then committed must be reloaded; rolling back to it would make
// the next write conflict with the write that did commit. Other errors
// (disk full, unavailable) promise that nothing was stored.
func mayDisagree(err error) bool {
	switch errs.CodeOf(err) {
	case errs.FailedPreconditionCode, errs.InternalCode, errs.OutcomeUnknownCode:
		return true
	}
	return false
}

func (o *owner) fail(ops []*op, err error) {
	for _, op := range ops {
		o.answer(op, nil, err)
	}
}

// size estimates the bytes op adds to a PlanWrite.
func (o *op) size() int {
	size := 256
	if r := o.recordErr; r != nil {
		size += len(r.GetMessage()) + len(r.GetStackSummary()) + len(r.GetAttributesJson())
	}
	for k, v := range o.merge {
		size += len(k) + len(v)
	}
	return size
}
