package session

import (
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
)

// Fencing: the directory keeps one actor per session in one process, but
// two processes (or two directories) may each activate one. The store
// decides which of them may write: each activation takes a new epoch
// (persistence.Activate), every write carries it, and a write of an older
// epoch fails with persistence.ErrFenced, storing nothing.
//
// So an actor takes its epoch before anything else and loads the session
// only after that: the load sees every write its predecessor committed
// before the activation, and every later write of the predecessor is
// fenced. A fenced actor knows its state may be behind the store; it
// answers everything it holds, and everything that still reaches it, with
// UNAVAILABLE, and stops. The caller's retry spawns a fresh actor, which
// activates anew; retries of appends are safe because message ids make
// them idempotent, and a fenced write stored nothing.

// activate submits the actor's Activate. It is the first write and holds
// the busy slot, so requests queue behind it.
func (o *owner) activate(ctx actor.Context) {
	o.submit(ctx, &persistence.Activate{Kind: persistence.OwnerSession, ID: o.id}, o.activated)
}

// activated takes the epoch and marks the state for a load, which must
// follow the activation. A failed activation (disk full, the writer gone)
// fails every request waiting for it; the next request tries again.
func (o *owner) activated(res persistence.Result) {
	err := res.Err
	if err == nil && res.Epoch <= 0 {
		err = errs.Internal("session %s: the store answered epoch %d to an activation", o.id, res.Epoch)
	}
	if err != nil {
		for len(o.queue) > 0 {
			o.pop().reply(nil, err)
		}
		return
	}
	o.epoch = res.Epoch
	o.stale = true
}

// fence ends this activation: w was refused because a newer one owns the
// session. w's requests and every queued one are answered UNAVAILABLE
// (nothing of them was stored); pump then asks the directory to stop us.
func (o *owner) fence(w *write) {
	if !o.fenced {
		o.env.fenced.Add(1)
	}
	o.fenced = true
	err := o.fencedErr()
	w.finish(persistence.Result{Err: err})
	for len(o.queue) > 0 {
		o.pop().reply(nil, err)
	}
}

func (o *owner) fencedErr() error {
	return errs.Unavailable("session %s is owned by a newer activation; retry", o.id)
}
