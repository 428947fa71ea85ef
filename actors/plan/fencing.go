package plan

import (
	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
)

// Fencing: the directory keeps one actor per plan in one process, but two
// processes (or two directories) may each activate one. The store decides
// which may write: each activation takes a new epoch (persistence.Activate),
// every PlanWrite carries it, and a write of an older epoch fails with
// persistence.ErrFenced, storing nothing.
//
// So an actor takes its epoch first, and loads the plan only once that
// committed: the load sees everything its predecessor committed before the
// activation, and the predecessor's later writes are fenced. Calls that
// arrive meanwhile wait in pending; they are accepted, in arrival order,
// after the load. A fenced actor's state may be behind the store, so it
// answers every request it holds or receives with UNAVAILABLE and asks to
// be stopped; the caller's retry reaches a fresh actor with a new epoch.
// The fenced write stored nothing, so a retry records the error once.

// activate submits the actor's Activate; it is sent before anything else.
func (o *owner) activate(ctx actor.Context) {
	o.tag++
	o.activation = o.tag
	ctx.Request(o.env.writerPID, &writer.Submit{Cmd: &persistence.Activate{Kind: persistence.OwnerPlan, ID: o.planID}, Tag: o.tag})
}

// activated takes the epoch, loads the plan and accepts the calls that
// waited. A failed activation breaks the actor like a failed load: every
// call is answered with the error until the directory stopped it.
func (o *owner) activated(ctx actor.Context, res persistence.Result) {
	o.activation = 0
	err := res.Err
	if err == nil && res.Epoch <= 0 {
		err = errs.Internal("plan %s: the store answered epoch %d to an activation", o.planID, res.Epoch)
	}
	if err != nil {
		o.broken = err
		o.askPassivation(ctx)
	} else {
		o.epoch = res.Epoch
		o.load(ctx)
	}
	pending := o.pending
	o.pending = nil
	for _, c := range pending {
		o.accept(ctx, c)
	}
	o.stopIfDone(ctx)
}

// fence ends this activation: b was refused because a newer one owns the
// plan. b's requests and the queued ones are answered UNAVAILABLE (nothing
// of them was stored), and so is every later call, until the directory,
// asked now, stops the actor.
func (o *owner) fence(ctx actor.Context, b *batch) {
	o.env.fenced.Add(1)
	o.broken = errs.Unavailable("plan %s is owned by a newer activation; retry", o.planID)
	o.fail(b.ops, o.broken)
	o.fail(o.queue, o.broken)
	o.queue = nil
	o.askPassivation(ctx)
}
