package lifecycle

import (
	"errors"
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// Ready is what the shell must do after an event, in this order: deliver
// Replies, submit Submit, start the Hold's timer, make the Load (and step
// Loaded), ask to be passivated, stop.
type Ready struct {
	Replies []Reply
	// Submit is the write to hand to the writer (at most one in flight).
	Submit *Write
	// Hold: a commit window opened (window.go); the next write waits.
	// When Hold.For > 0, start a timer of Hold.For and step
	// WindowClosed(Hold.Gen) when it fires.
	Hold Hold
	// Load: read the committed state now and step Loaded.
	Load bool
	// AskPassivation: ask whoever spawned the owner (its directory) to
	// passivate it; an owner without one steps Passivate itself.
	AskPassivation bool
	// Stop: stop the owner now; nothing is in flight or waiting.
	Stop bool
	// Fenced: this activation was just fenced (counted by the shell).
	Fenced bool
}

// Kernel is one owner's lifecycle. The zero value is not usable: New.
type Kernel struct {
	d    Domain
	fold Folding // d, when its first write may carry the activation

	epoch      int64  // 0 until the activation committed
	activation uint64 // the tag of the Activate in flight, or 0
	stale      bool   // the state must be loaded before the next decision
	partial    bool   // only Partly requests can be decided before a load (Outcome.Partial)
	loading    bool   // a Load effect is out
	inflight   *Write
	win        window
	tag        uint64
	seq        uint64

	arrivals []*Request // arrived, not yet accepted (no loaded state)
	queue    []*Request // accepted, waiting for a write

	refusing    error // fenced or moving out: every request gets this
	failed      bool  // the last activation or load failed
	noFold      bool  // a folded write failed: activate alone from now on
	passivating bool  // told to passivate: stop once idle
	idleAsked   bool  // asked to be passivated already
	touched     bool  // a request arrived since the last idle tick
	stopped     bool

	rd Ready
	an Answers
}

// New returns the kernel of a fresh owner of d.
func New(d Domain) *Kernel {
	k := &Kernel{d: d, stale: true}
	k.fold, _ = d.(Folding)
	return k
}

// Ready returns the effects collected since the last call and clears them.
// Its Replies are valid until the next event is stepped (their array is
// reused: one owner answers many requests).
func (k *Kernel) Ready() Ready {
	rd := k.rd
	rd.Replies = k.an.list
	clear(k.an.list[len(k.an.list):cap(k.an.list)]) // what the last use left
	k.rd, k.an.list = Ready{}, k.an.list[:0]
	return rd
}

// Epoch is the activation's epoch, 0 before it committed.
func (k *Kernel) Epoch() int64 { return k.epoch }

// InFlight is the tag of the write (or activation) in flight, 0 if none.
func (k *Kernel) InFlight() uint64 {
	if k.activation != 0 {
		return k.activation
	}
	if k.inflight != nil {
		return k.inflight.Tag
	}
	return 0
}

// Waiting is the number of requests waiting (arrived or queued, not in
// flight).
func (k *Kernel) Waiting() int { return len(k.arrivals) + len(k.queue) }

// Arrive steps a request's arrival; the kernel numbers it (r.Seq).
func (k *Kernel) Arrive(r *Request) {
	k.seq++
	r.Seq = k.seq
	k.touched = true
	if k.stopped {
		k.an.Reply(r, nil, k.stoppedErr())
		return
	}
	if k.refusing != nil {
		k.an.Reply(r, nil, k.refusing)
		return
	}
	k.arrivals = append(k.arrivals, r)
	k.pump()
}

// Applied steps the writer's result of the submission tagged tag; took is
// how long it was in flight, by the shell's clock (it sizes the commit
// window).
func (k *Kernel) Applied(tag uint64, res persistence.Result, took time.Duration) {
	switch {
	case tag != 0 && tag == k.activation:
		k.activated(res)
	case k.inflight != nil && tag == k.inflight.Tag:
		w := k.inflight
		k.inflight = nil
		if w.folded {
			k.foldApplied(w, res, took)
		} else if errors.Is(res.Err, persistence.ErrFenced) {
			k.fence(w)
		} else {
			k.applied(w, res, took)
		}
	default:
		return // not ours to finish: a stale reply
	}
	k.pump()
}

// Loaded steps the outcome of a Load effect.
func (k *Kernel) Loaded(err error) {
	if !k.loading {
		return
	}
	k.loading = false
	if err != nil {
		// Nothing can be decided on a state that is unknown: every
		// waiting request is refused (nothing was stored), and the
		// owner asks to be passivated; a request arriving before it
		// stopped tries the load again.
		kind, id := k.d.Describe()
		k.failed = true
		k.refuseAll(errs.Unavailable("%s %s could not be loaded: %v", kind, id, err))
	} else {
		k.stale, k.partial, k.failed = false, false, false
		k.d.Rebase(k.queue)
	}
	k.pump()
}

// Tick steps the owner's idle timer (one tick per idle timeout): an owner
// that received no request since the previous tick and holds nothing asks
// to be passivated.
func (k *Kernel) Tick() {
	if k.touched {
		k.touched = false
		return
	}
	if k.idle() && !k.passivating && !k.idleAsked && !k.stopped {
		k.idleAsked = true
		k.rd.AskPassivation = true
	}
}

// WindowClosed steps the timer of the commit window gen firing: the write
// it held starts with what queued. The timer of a window that closed
// already (its callers came back, passivation began, a later write was
// answered) changes nothing.
func (k *Kernel) WindowClosed(gen uint64) {
	if k.win.closed(gen) {
		k.pump()
	}
}

// Passivate steps the order to stop: the owner stops as soon as nothing
// is in flight or waiting; what arrives before that is served.
func (k *Kernel) Passivate() {
	k.passivating = true
	k.pump()
}

// MoveOut steps the owner's identity moving elsewhere (a cluster giving it
// to another member): waiting and later requests are refused UNAVAILABLE
// (nothing of them was stored; they are retried at the new owner), the
// write in flight is answered with its real outcome, then the owner stops.
func (k *Kernel) MoveOut() {
	if k.refusing == nil {
		kind, id := k.d.Describe()
		k.refusing = errs.Unavailable("%s %s is moving to another member; retry", kind, id)
	}
	k.refuseAll(k.refusing)
	k.passivating = true
	k.pump()
}

// Stopped steps a stop the owner did not choose (its parent or the system
// stopped it, or it restarts after a panic): everything it holds is
// answered, the write in flight OUTCOME_UNKNOWN (it was submitted and may
// still commit), everything else UNAVAILABLE (never submitted).
func (k *Kernel) Stopped() {
	if k.stopped {
		return
	}
	k.stopped = true
	kind, id := k.d.Describe()
	if w := k.inflight; w != nil {
		k.inflight = nil
		k.d.Applied(w, persistence.Result{Err: errs.OutcomeUnknown("%s %s: the owner stopped with this write in flight; it may still commit", kind, id)}, &k.an)
	}
	k.activation = 0
	k.refuseAll(k.stoppedErr())
}

func (k *Kernel) stoppedErr() error {
	kind, id := k.d.Describe()
	return errs.Unavailable("%s %s: the owner stopped; the request was not stored", kind, id)
}

func (k *Kernel) idle() bool {
	return k.inflight == nil && k.activation == 0 && !k.loading && len(k.arrivals) == 0 && len(k.queue) == 0
}

// pump moves the owner on as far as it can without an answer from outside:
// it activates, loads, accepts arrivals, starts the next write, and asks to
// be passivated or stops when idle.
func (k *Kernel) pump() {
	if k.stopped {
		return
	}
	for k.activation == 0 && !k.loading && (len(k.arrivals) > 0 || len(k.queue) > 0) {
		folding := k.epoch == 0 && k.fold != nil && !k.noFold
		if k.epoch == 0 && !folding {
			k.activate()
			break
		}
		if folding && k.inflight != nil {
			break // the folded write decides whether this owner holds
		}
		if k.needsLoad(folding) {
			if k.inflight != nil {
				break // the load waits for the write: it must see its outcome
			}
			k.loading = true
			k.rd.Load = true
			break
		}
		for len(k.arrivals) > 0 {
			r := k.arrivals[0]
			k.arrivals[0] = nil
			k.arrivals = k.arrivals[1:]
			if k.d.Accept(r, &k.an) {
				k.queue = append(k.queue, r)
			}
		}
		k.arrivals = nil
		if k.inflight != nil || len(k.queue) == 0 {
			break
		}
		run, growable := k.cut()
		if folding && !k.fold.Folds(run[0]) {
			// Not a write that carries the activation: today's path,
			// which loads again after it.
			k.activate()
			break
		}
		if wait, h := k.win.holds(len(run), k.maxRequests(), growable, k.passivating); wait {
			if h.For > 0 {
				k.rd.Hold = h
			}
			break
		}
		k.queue = k.queue[len(run):]
		if len(k.queue) == 0 {
			k.queue = nil
		}
		w := k.d.Decide(run, k.epoch, &k.an)
		if w == nil {
			// Nothing to write: the run was answered. A refusal may
			// change nothing the domain derived; Rebase keeps it true.
			k.d.Rebase(k.queue)
			continue
		}
		if folding {
			w.Cmd, w.folded = k.fold.Fold(w.Cmd, !k.stale), true
		}
		k.submit(w)
		break
	}
	if !k.idle() {
		return
	}
	if k.passivating {
		k.stopped = true
		k.rd.Stop = true
		return
	}
	if !k.idleAsked && (k.refusing != nil || k.failed || (!k.stale && !k.d.Owns())) {
		// Nothing to own (no such entity, nothing loaded, fenced): do
		// not hold an owner for the id.
		k.idleAsked = true
		k.rd.AskPassivation = true
	}
}

// needsLoad reports whether the state must be loaded before the head is
// decided: it is stale, unless a fresh owner folds a Blind head; or it is
// partial (a blind fold's result) and the head is not Partly.
func (k *Kernel) needsLoad(folding bool) bool {
	switch {
	case k.stale:
		return !(folding && k.fold.Blind(k.head()))
	case k.partial:
		return !k.fold.Partly(k.head())
	}
	return false
}

// head is the request that heads the queue (or, none queued, the
// arrivals).
func (k *Kernel) head() *Request {
	if len(k.queue) > 0 {
		return k.queue[0]
	}
	return k.arrivals[0]
}

// cut returns the leading run of the queue that the next write carries:
// the head, then the Batched requests after it, within the domain's
// limits. Only Batched and Leads heads take company, and a Leads request
// only heads a run. growable: the run ended only because the queue did,
// so requests arriving later would join it.
func (k *Kernel) cut() (run []*Request, growable bool) {
	maxN, maxBytes := k.d.Limits()
	b, size := k.d.Batching(k.queue[0])
	n := 1
	if b == Alone {
		return k.queue[:1:1], false
	}
	for n < len(k.queue) && n < maxN {
		nb, ns := k.d.Batching(k.queue[n])
		if nb != Batched || size+ns > maxBytes {
			return k.queue[:n:n], false
		}
		size += ns
		n++
	}
	return k.queue[:n:n], n < maxN
}

func (k *Kernel) maxRequests() int {
	n, _ := k.d.Limits()
	return n
}

func (k *Kernel) submit(w *Write) {
	k.tag++
	w.Tag = k.tag
	k.inflight = w
	k.rd.Submit = w
}

func (k *Kernel) activate() {
	k.tag++
	k.activation = k.tag
	k.rd.Submit = &Write{Tag: k.tag, Cmd: k.d.Activate()}
}

// activated takes the epoch; the state is loaded next (pump). A failed
// activation (disk full, the writer gone) refuses every waiting request;
// the owner asks to be passivated, and a request arriving before it
// stopped tries again.
func (k *Kernel) activated(res persistence.Result) {
	k.activation = 0
	err := res.Err
	if err == nil && res.Epoch <= 0 {
		kind, id := k.d.Describe()
		err = errs.Internal("%s %s: the store answered epoch %d to an activation", kind, id, res.Epoch)
	}
	if err != nil {
		k.failed = true
		k.refuseAll(err)
		return
	}
	k.epoch, k.stale, k.failed = res.Epoch, true, false
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
		k.noFold, k.stale = true, true
		k.queue = append(w.Carried[:len(w.Carried):len(w.Carried)], k.queue...)
		k.d.Rebase(k.queue)
		if k.refusing != nil {
			k.refuseAll(k.refusing)
		}
		return
	}
	k.stale = false
	k.applied(w, res, took)
	if res.Epoch <= 0 {
		// The write committed (its requests are answered), but without
		// an epoch this owner cannot write again: a store bug.
		kind, id := k.d.Describe()
		k.failed, k.noFold, k.stale = true, true, true
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
	}
	if out.Partial && k.fold != nil {
		k.partial = true
	}
	switch {
	case out.Stale:
		k.stale = true // loaded (then rebased) before the next decision
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
	if k.refusing == nil {
		k.rd.Fenced = true
	}
	k.refusing = errs.Unavailable("%s %s is owned by a newer activation; retry", kind, id)
	k.d.Applied(w, persistence.Result{Err: k.refusing}, &k.an)
	k.refuseAll(k.refusing)
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
