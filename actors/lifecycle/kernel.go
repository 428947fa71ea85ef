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

	phase    phase  // phase.go: which fields below are orthogonal to it, and why
	resume   phase  // where a failed Activate or Load returns to
	refusal  error  // phaseRefusing: what every request is answered
	epoch    int64  // 0 until the activation committed
	inflight *Write // the one submission in flight: the Activate, a folded write or a write
	win      window
	tag      uint64
	seq      uint64

	arrivals []*Request // arrived, not yet accepted (no loaded state)
	queue    []*Request // accepted, waiting for a write

	failed      bool // the last activation or load failed
	noFold      bool // a folded write failed: activate alone from now on
	passivating bool // told to passivate: stop once idle
	idleAsked   bool // asked to be passivated already
	touched     bool // a request arrived since the last idle tick

	rd Ready
	an Answers
}

// New returns the kernel of a fresh owner of d.
func New(d Domain) *Kernel {
	k := &Kernel{d: d, phase: phaseStale}
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
	switch k.phase {
	case phaseStopped:
		k.an.Reply(r, nil, k.stoppedErr())
		return
	case phaseRefusing:
		k.an.Reply(r, nil, k.refusal)
		return
	}
	k.arrivals = append(k.arrivals, r)
	k.pump()
}

// Applied steps the writer's result of the submission tagged tag; took is
// how long it was in flight, by the shell's clock (it sizes the commit
// window).
func (k *Kernel) Applied(tag uint64, res persistence.Result, took time.Duration) {
	w := k.inflight
	if w == nil || tag != w.Tag {
		return // not ours to finish: a stale reply
	}
	k.inflight = nil
	// What finishes is told by the write, not by the phase: an ending
	// phase does not say what it ends.
	switch {
	case w.activates:
		k.activated(res)
	case w.folded:
		k.foldApplied(w, res, took)
	case errors.Is(res.Err, persistence.ErrFenced):
		k.fence(w)
	default:
		k.applied(w, res, took)
	}
	k.pump()
}

// Loaded steps the outcome of a Load effect.
func (k *Kernel) Loaded(err error) {
	if k.phase != phaseLoading {
		return
	}
	if err != nil {
		// Nothing can be decided on a state that is unknown: every
		// waiting request is refused (nothing was stored), and the
		// owner asks to be passivated; a request arriving before it
		// stopped tries the load again.
		kind, id := k.d.Describe()
		k.phase, k.failed = k.resume, true
		k.refuseAll(errs.Unavailable("%s %s could not be loaded: %v", kind, id, err))
	} else {
		k.phase, k.failed = phaseLoaded, false
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
	if k.idle() && !k.passivating && !k.idleAsked && k.phase != phaseStopped {
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
	if k.phase == phaseStopped {
		return
	}
	if k.phase != phaseRefusing { // fenced already: that stays the answer
		kind, id := k.d.Describe()
		k.refusal = errs.Unavailable("%s %s is moving to another member; retry", kind, id)
		k.become(phaseRefusing)
	}
	k.refuseAll(k.refusal)
	k.passivating = true
	k.pump()
}

// Stopped steps a stop the owner did not choose (its parent or the system
// stopped it, or it restarts after a panic): everything it holds is
// answered, the write in flight OUTCOME_UNKNOWN (it was submitted and may
// still commit), everything else UNAVAILABLE (never submitted).
func (k *Kernel) Stopped() {
	if k.phase == phaseStopped {
		return
	}
	k.become(phaseStopped)
	kind, id := k.d.Describe()
	if w := k.inflight; w != nil {
		k.inflight = nil
		if !w.activates { // an Activate carries no request
			k.d.Applied(w, persistence.Result{Err: errs.OutcomeUnknown("%s %s: the owner stopped with this write in flight; it may still commit", kind, id)}, &k.an)
		}
	}
	k.refuseAll(k.stoppedErr())
}

func (k *Kernel) stoppedErr() error {
	kind, id := k.d.Describe()
	return errs.Unavailable("%s %s: the owner stopped; the request was not stored", kind, id)
}

func (k *Kernel) idle() bool {
	return k.inflight == nil && k.phase != phaseLoading && len(k.arrivals) == 0 && len(k.queue) == 0
}

// pump moves the owner on as far as it can without an answer from outside:
// it activates, loads, accepts arrivals, starts the next write, and asks to
// be passivated or stops when idle.
func (k *Kernel) pump() {
	if k.phase == phaseStopped {
		return
	}
	for k.phase != phaseActivating && k.phase != phaseLoading && (len(k.arrivals) > 0 || len(k.queue) > 0) {
		folding := k.epoch == 0 && k.fold != nil && !k.noFold
		if k.epoch == 0 && !folding {
			k.activate()
			break
		}
		if k.phase == phaseFolding {
			break // the folded write decides whether this owner holds
		}
		if k.needsLoad(folding) {
			if k.inflight != nil {
				break // the load waits for the write: it must see its outcome
			}
			k.resume, k.phase = k.phase, phaseLoading
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
			w.Cmd, w.folded = k.fold.Fold(w.Cmd, k.phase == phaseLoaded), true
			k.phase = phaseFolding
		}
		k.submit(w)
		break
	}
	if !k.idle() {
		return
	}
	if k.passivating {
		k.become(phaseStopped)
		k.rd.Stop = true
		return
	}
	if !k.idleAsked && (k.phase == phaseRefusing || k.failed || (k.phase != phaseStale && !k.d.Owns())) {
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
	switch k.phase {
	case phaseStale:
		return !(folding && k.fold.Blind(k.head()))
	case phasePartial:
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
	k.resume, k.phase = k.phase, phaseActivating
	k.submit(&Write{Cmd: k.d.Activate(), activates: true})
}
