package lifecycle

import (
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// What the result of the submission in flight does to the owner: each
// kind of submission (Kernel.Applied tells them apart) ends its own way.

// activated takes the epoch; the state is loaded next (pump). A failed
// activation (disk full, the writer gone) refuses every waiting request;
// the owner asks to be passivated, and a request arriving before it
// stopped tries again.
func (k *Kernel) activated(res persistence.Result) {
	err := res.Err
	if err == nil && res.Epoch <= 0 {
		kind, id := k.d.Describe()
		err = errs.Internal("%s %s: the store answered epoch %d to an activation", kind, id, res.Epoch)
	}
	if err != nil {
		k.failed = true
		k.become(k.resume)
		k.refuseAll(err)
		return
	}
	k.epoch, k.failed = res.Epoch, false
	k.become(phaseStale) // loaded next: the load sees what an earlier owner committed
}

// foldApplied steps the result of a write that carried the activation
// (Folding). Committed: the epoch is taken and the state is the load the
// store confirmed plus this write, whose requests are answered as any
// write's. Failed, however: nothing of it was stored and none of its
// requests was answered; they go back to the head of the queue and the
// owner activates alone, then loads and decides them again (a store that
// refused the load's state, a create of a session that exists, a
// transaction that rolled back: each is decided anew as today). A move or
// stop meanwhile refuses them as it refuses the queue.
func (k *Kernel) foldApplied(w *Write, res persistence.Result, took time.Duration) {
	if res.Err != nil {
		k.noFold = true
		k.become(phaseStale)
		k.queue = append(w.Carried[:len(w.Carried):len(w.Carried)], k.queue...)
		k.d.Rebase(k.queue)
		if k.phase == phaseRefusing {
			k.refuseAll(k.refusal)
		}
		return
	}
	k.become(phaseLoaded) // the load the store confirmed, plus this write
	k.applied(w, res, took)
	if res.Epoch <= 0 {
		// The write committed (its requests are answered), but without
		// an epoch this owner cannot write again: a store bug.
		kind, id := k.d.Describe()
		k.failed, k.noFold = true, true
		k.become(phaseStale)
		k.refuseAll(errs.Internal("%s %s: the store answered epoch %d to an activation", kind, id, res.Epoch))
		return
	}
	k.epoch = res.Epoch
}

func (k *Kernel) applied(w *Write, res persistence.Result, took time.Duration) {
	out := k.d.Applied(w, res, &k.an)
	if out.Continue != nil {
		k.win.committed(0, 0, 0, 0)
		k.submit(&Write{Cmd: out.Continue, Carried: w.Carried, Data: out.ContinueData})
		return
	}
	if res.Err == nil && !out.Stale && len(out.Requeue) == 0 {
		k.win.committed(len(w.Carried), len(k.queue), took, w.Window)
	} else {
		k.win.committed(0, 0, 0, 0) // a failed write opens no window
	}
	if len(out.Requeue) > 0 {
		k.queue = append(out.Requeue[:len(out.Requeue):len(out.Requeue)], k.queue...)
		if k.phase == phaseRefusing {
			// Moved out meanwhile: they wait again, and are refused as
			// the queue was (nothing of them was stored).
			k.refuseAll(k.refusal)
		}
	}
	if out.Partial && k.fold != nil {
		k.become(phasePartial)
	}
	switch {
	case out.Stale:
		k.become(phaseStale) // loaded (then rebased) before the next decision
	case out.Rebase:
		k.d.Rebase(k.queue)
	}
}

// fence ends this activation: w was refused because a newer one owns the
// entity. w's requests, the waiting ones and every later one are answered
// UNAVAILABLE (nothing of them was stored); the owner then asks to be
// passivated. The retry reaches a fresh owner, which activates anew.
func (k *Kernel) fence(w *Write) {
	kind, id := k.d.Describe()
	if k.phase != phaseRefusing {
		k.rd.Fenced = true
	}
	k.refusal = errs.Unavailable("%s %s is owned by a newer activation; retry", kind, id)
	k.become(phaseRefusing)
	k.d.Applied(w, persistence.Result{Err: k.refusal}, &k.an)
	k.refuseAll(k.refusal)
}

// refuseAll answers every waiting request with err.
func (k *Kernel) refuseAll(err error) {
	for _, r := range k.queue {
		k.d.Refuse(r, err, &k.an)
	}
	k.queue = nil
	for _, r := range k.arrivals {
		k.an.Reply(r, nil, err)
	}
	k.arrivals = nil
}
