package plan

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/writer"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"
)

// owner is the plan actor: the only code that assigns the plan's sequences
// and changes its retry counters, policy and error_details.
//
// Invariants:
//   - at most one PlanWrite is in flight (inflight != nil); requests that
//     arrive meanwhile wait in queue and ride in the next write;
//   - working == committed advanced by inflight's ops, then queue's ops;
//   - a request is answered only after the write carrying it committed, or
//     with the error that rolled it back; so replies, like sequences, are in
//     arrival order, and an acknowledged record is durable. The exception
//     is a retry of a committed record (retry.go): it is answered with that
//     record as soon as the actor or the store knows it;
//   - nothing is loaded or decided before the actor's Activate committed
//     (activation != 0 until then; calls wait in pending), and every
//     PlanWrite carries the epoch it returned (see fencing.go).
type owner struct {
	planID string
	env    *env

	committed *state
	working   *state
	inflight  *batch
	queue     []*op
	tag       uint64

	epoch      int64
	activation uint64 // the tag of the Activate in flight, or 0
	pending    []*directory.Call

	// Client record ids this activation knows (retry.go): byRecord maps
	// the id of each unanswered RecordError that named one to its op;
	// recent holds the latest committed such records.
	byRecord map[string]*op
	recent   recent

	passivating bool
	// standalone: a cluster kind (cluster.go), with no directory parent.
	// It stops itself when idle, and admit (may be nil) and the release it
	// returns bracket each bare request it accepts.
	standalone bool
	admit      func(proto.Message) (release func(), err error)
	// serveRead serves a cluster kind's reads, which need no owner, as
	// the directory's Unkeyed does; it replies itself.
	serveRead func(*directory.Call)
	// broken is set when the plan could not be loaded; every request is
	// answered with it until the directory has stopped this actor.
	broken error
}

// batch is the write in flight.
type batch struct {
	tag uint64
	ops []*op
}

// env is what every owner of one Service shares; read-only after Start.
type env struct {
	reader    persistence.Reader
	writerPID *actor.PID
	cfg       Config
	live      *liveSet
	fenced    atomic.Int64 // activations whose write the store fenced
}

func newOwner(planID string, e *env) actor.Actor { return &owner{planID: planID, env: e} }

func (o *owner) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		o.env.live.add()
		if !o.standalone { // a cluster kind activates on ClusterInit
			o.activate(ctx)
		}
		if o.env.cfg.IdleTimeout > 0 {
			ctx.SetReceiveTimeout(o.env.cfg.IdleTimeout)
		}
	case *directory.Call:
		o.call(ctx, m)
	case *cluster.ClusterInit:
		o.clusterInit(ctx, m)
	case *writer.Applied:
		if o.activation != 0 && m.Tag == o.activation {
			o.activated(ctx, m.Result)
			return
		}
		o.applied(ctx, m)
	case *actor.DeadLetterResponse:
		// Only an Activate can get here unanswered before anything
		// else was sent: the audit actor is gone.
		if o.activation != 0 {
			o.activated(ctx, persistence.Result{Err: errs.Unavailable("plan %s: the audit writer is not running", o.planID)})
		}
	case *actor.ReceiveTimeout:
		// The timer fires once; re-arm it so a busy owner asks again later.
		ctx.SetReceiveTimeout(o.env.cfg.IdleTimeout)
		if o.idle() {
			o.askPassivation(ctx)
		}
	case *directory.Passivate:
		o.passivating = true
		o.stopIfDone(ctx)
	case moveOut:
		o.moveOut(ctx)
	case *actor.Stopped:
		// Only a forced stop (the directory or the system stopping)
		// leaves work here; passivation waits for it.
		o.failAll()
		o.env.live.done()
	case proto.Message:
		// Only a cluster kind is sent bare requests; a directory wraps
		// them in a *directory.Call.
		if o.standalone {
			o.acceptBare(ctx, m)
		}
	}
}

func (o *owner) call(ctx actor.Context, c *directory.Call) {
	if o.activation != 0 {
		o.pending = append(o.pending, c)
		return
	}
	o.accept(ctx, c)
}

// load reads the plan's committed state: after the activation (so it
// includes every write of earlier owners that can ever commit), and again
// when a write says memory and store disagree.
func (o *owner) load(ctx actor.Context) {
	lctx, cancel := context.WithTimeout(context.Background(), o.env.cfg.AskTimeout)
	defer cancel()
	ps, err := o.env.reader.GetPlan(lctx, o.planID)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		o.committed, err = freshState(), nil
	case err == nil:
		o.committed, err = loadedState(ps)
	}
	if err != nil {
		// The plan's state is unknown, so nothing may be decided on it.
		// Ask to be stopped; the next request spawns a fresh owner that
		// loads again.
		o.broken = errs.Unavailable("plan %s could not be loaded: %v", o.planID, err)
		o.askPassivation(ctx)
		return
	}
	o.working = o.committed.clone()
}

// askPassivation asks the directory to passivate this owner. It must be a
// Request: the directory identifies the owner by the sender.
func (o *owner) askPassivation(ctx actor.Context) {
	if o.standalone {
		// No directory: stop once nothing is in flight. A later
		// request activates a fresh actor, which takes a new epoch.
		o.passivating = true
		o.stopIfDone(ctx)
		return
	}
	ctx.Request(ctx.Parent(), &directory.Idle{})
}

func (o *owner) idle() bool {
	return o.inflight == nil && len(o.queue) == 0 && o.activation == 0 && len(o.pending) == 0
}

func (o *owner) stopIfDone(ctx actor.Context) {
	if o.passivating && o.idle() {
		ctx.Stop(ctx.Self())
	}
}

// accept validates one request, computes its outcome against the working
// state (so its sequence is assigned now, in arrival order), queues it and
// starts a write if none is in flight.
func (o *owner) accept(ctx actor.Context, c *directory.Call) {
	if o.broken != nil {
		c.Replier.Reply(nil, o.broken)
		return
	}
	op, err := o.opOf(c)
	if err != nil {
		c.Replier.Reply(nil, err)
		return
	}
	if o.retried(op) {
		return
	}
	o.working.apply(op)
	o.queue = append(o.queue, op)
	o.flush(ctx)
}

func (o *owner) opOf(c *directory.Call) (*op, error) {
	maxBytes := o.env.cfg.MaxMessageBytes
	switch m := c.Msg.(type) {
	case *planv1.RecordErrorRequest:
		r, err := validateRecordError(m, maxBytes)
		if err != nil {
			return nil, err
		}
		id := r.GetRecordId()
		if id == "" {
			id = ids.New()
		}
		return &op{
			kind: opRecordError, planID: o.planID, recordErr: r, replier: c.Replier,
			step: stepKey{r.GetPhase(), r.GetStepId()}, recordID: id, recordedAt: time.Now(),
		}, nil
	case *planv1.SetPolicyRequest:
		if err := validateSetPolicy(m); err != nil {
			return nil, err
		}
		return &op{kind: opSetPolicy, planID: o.planID, policy: m.GetMaxRetries(), replier: c.Replier}, nil
	case *planv1.RecordSuccessRequest:
		if err := validateRecordSuccess(m); err != nil {
			return nil, err
		}
		return &op{kind: opRecordSuccess, planID: o.planID, step: stepKey{m.GetPhase(), m.GetStepId()}, replier: c.Replier}, nil
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
		return &op{kind: opMergeDetails, planID: o.planID, merge: add, replier: c.Replier}, nil
	default:
		return nil, errs.InvalidArgument("a plan actor cannot serve %T", c.Msg)
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

// flush starts the next write when none is in flight.
func (o *owner) flush(ctx actor.Context) {
	if o.inflight != nil || len(o.queue) == 0 {
		return
	}
	n := cut(o.queue)
	ops := o.queue[:n:n]
	w, err := writeOf(o.planID, o.committed, ops, time.Now())
	if err != nil {
		// Only a bug gets here; fail the batch and recompute the rest.
		o.queue = o.queue[n:]
		o.fail(ops, err)
		o.rollback()
		o.flush(ctx)
		return
	}
	o.queue = o.queue[n:]
	w.Epoch = o.epoch
	o.tag++
	o.inflight = &batch{tag: o.tag, ops: ops}
	ctx.Request(o.env.writerPID, &writer.Submit{Cmd: w, Tag: o.tag})
}

// applied ends the write in flight: on commit, committed advances by its
// ops and they are answered; on failure, exactly its ops fail and the
// queued ones are recomputed from the last committed state (reloaded
// first when the failure leaves it in doubt: mayDisagree).
func (o *owner) applied(ctx actor.Context, a *writer.Applied) {
	b := o.inflight
	if b == nil || a.Tag != b.tag {
		return // not the write in flight: a stale answer
	}
	o.inflight = nil
	var exist *persistence.RecordsExistError
	if err := a.Result.Err; errors.Is(err, persistence.ErrFenced) {
		o.fence(ctx, b)
	} else if errors.As(err, &exist) {
		o.recordsExist(ctx, b, exist)
	} else if err != nil {
		o.fail(b.ops, err)
		if mayDisagree(err) {
			o.reload(ctx)
		} else {
			o.rollback()
		}
	} else {
		for _, op := range b.ops {
			o.committed.advance(op)
			o.answer(op, op.response(), nil)
		}
	}
	o.flush(ctx)
	o.stopIfDone(ctx)
}

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

// rollback rebuilds working from committed and recomputes the outcome of
// every queued (unanswered, unsent) request against it.
func (o *owner) rollback() {
	o.working = o.committed.clone()
	for _, op := range o.queue {
		o.working.apply(op)
	}
}

func (o *owner) reload(ctx actor.Context) {
	o.load(ctx)
	if o.broken != nil {
		o.fail(o.queue, o.broken)
		o.queue = nil
		return
	}
	o.rollback()
}

// failAll answers every request still waiting, so none is left without a
// reply when the actor stops.
func (o *owner) failAll() {
	if o.inflight != nil {
		// Handed to the writer already: it may still commit.
		if o.standalone {
			// A cluster caller (placement.Router) retries an answered
			// UNAVAILABLE as "nothing stored", which this write may not
			// be: leave it unanswered, which the caller must treat as
			// "may have been applied".
			for _, op := range o.inflight.ops {
				o.abandonOp(op)
			}
		} else {
			o.fail(o.inflight.ops, errs.OutcomeUnknown("plan %s stopped before its write was answered; the write may still commit", o.planID))
		}
		o.inflight = nil
	}
	stopped := errs.Unavailable("plan %s stopped; the request was not stored", o.planID)
	o.fail(o.queue, stopped)
	o.queue = nil
	for _, c := range o.pending {
		c.Replier.Reply(nil, stopped)
	}
	o.pending = nil
}
