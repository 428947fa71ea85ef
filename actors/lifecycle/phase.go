package lifecycle

import "fmt"

// phase is where an owner is in its life; exactly one holds at a time.
// It says what the owner may do next with the requests that wait:
//
//	stale (epoch 0) ─Activate─▶ activating ─committed─▶ stale (epoch held)
//	stale, partial ─Load─▶ loading ─▶ loaded
//	stale (epoch 0, Blind head), loaded (epoch 0) ─fold─▶ folding ─▶ loaded, partial or stale
//	loaded, partial ─a write's Outcome.Stale─▶ stale
//	loaded (epoch 0, a head that does not fold) ─Activate─▶ activating
//	a failed Activate or Load ─▶ where it started (resume)
//	any ─fenced, moving out─▶ refusing ─▶ stopped; any ─▶ stopped
//
// Invariants (k is the Kernel):
//   - phaseActivating ⇒ k.inflight is the lone Activate (Write.activates),
//     and k.epoch == 0; phaseFolding ⇒ k.inflight is the write carrying
//     the activation (Write.folded), and k.epoch == 0;
//   - phaseLoading ⇒ k.inflight == nil: a load never races a write of the
//     owner's own, whose commit it might or might not see;
//     k.resume is where a failed Activate or Load returns to (stale,
//     partial or, epoch 0, loaded): the owner knows what it knew before;
//   - phasePartial ⇒ k.epoch > 0 (only a committed blind fold tells part
//     of the state); phaseLoaded with k.epoch == 0 only for a Folding
//     owner that loaded before its first write;
//   - phaseRefusing and phaseStopped are absorbing (become): nothing is
//     decided in them, so what a late result tells of memory is moot;
//     what is in flight (even the Activate or a folded write) still ends
//     through its own path, told by the Write, not by the phase. Between
//     events nothing waits in them; phaseStopped holds nothing in flight.
//
// invariant checks them; the scripts' runner checks it after every event.
//
// What is not a phase stays a field of Kernel, because it is independent
// of it: the epoch (a value, which stale and loaded take both with and
// without); the write in flight (a write runs in loaded and partial and
// finishes in the ending phases); passivating (an order to drain can come
// in every phase, and the owner keeps its phase while it drains); failed
// (the last Activate or Load failed: the owner stays where it was and
// retries from there on the next arrival; the fact only makes an idle
// owner ask to be passivated); noFold (history: a folded write failed
// once); idleAsked and touched (the idle timer's bookkeeping).
type phase uint8

const (
	// phaseStale: memory may not be the committed state; it is loaded
	// before the next decision (save a Blind head of a fresh Folding
	// owner). A fresh owner starts here, with no epoch, and activates
	// first unless it folds.
	phaseStale phase = iota
	// phaseActivating: the Activate alone is in flight; requests wait.
	phaseActivating
	// phaseLoading: a Load is out (the shell steps Loaded before any other
	// event); requests wait.
	phaseLoading
	// phaseFolding: the first write, carrying the activation, is in
	// flight; requests wait for it to tell whether the owner holds.
	phaseFolding
	// phasePartial: the epoch is held and memory is what a blind fold's
	// result told: only Partly heads are decided before a load.
	phasePartial
	// phaseLoaded: memory is the committed state; the owner decides, one
	// write at a time.
	phaseLoaded
	// phaseRefusing: fenced, or moving out: every waiting and later
	// request is refused with Kernel.refusal.
	phaseRefusing
	// phaseStopped: stopped; every later request is refused.
	phaseStopped
)

var phaseNames = [...]string{
	phaseStale:      "stale",
	phaseActivating: "activating",
	phaseLoading:    "loading",
	phaseFolding:    "folding",
	phasePartial:    "partial",
	phaseLoaded:     "loaded",
	phaseRefusing:   "refusing",
	phaseStopped:    "stopped",
}

func (p phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "phase(?)"
}

// ending reports whether p is refusing or stopped.
func (p phase) ending() bool { return p >= phaseRefusing }

// become moves the owner to p, but never back out of an ending phase nor
// from stopped to refusing.
func (k *Kernel) become(p phase) {
	if k.phase.ending() && p <= k.phase {
		return
	}
	k.phase = p
}

// Phase names the owner's phase, for traces and logs.
func (k *Kernel) Phase() string { return k.phase.String() }

// invariant reports the first invariant of phase that k breaks, or nil.
func (k *Kernel) invariant() error {
	w, waiting := k.inflight, len(k.arrivals)+len(k.queue)
	fail := func(what string) error {
		return fmt.Errorf("phase %v (epoch %d, in flight %v, %d waiting): %s", k.phase, k.epoch, w != nil, waiting, what)
	}
	switch {
	case k.phase == phaseActivating && (w == nil || !w.activates || k.epoch != 0):
		return fail("activating without the lone Activate in flight at epoch 0")
	case k.phase == phaseFolding && (w == nil || !w.folded || k.epoch != 0):
		return fail("folding without the folded write in flight at epoch 0")
	case w != nil && w.activates && k.phase != phaseActivating && k.phase != phaseRefusing:
		return fail("the Activate in flight outside activating")
	case k.phase == phaseLoading && w != nil:
		return fail("a load out with a write in flight")
	case k.phase == phaseLoading && k.resume != phaseStale && k.resume != phasePartial:
		return fail("a load that would fail back to " + k.resume.String())
	case k.phase == phasePartial && k.epoch <= 0:
		return fail("partial without an epoch")
	case k.phase == phaseLoaded && k.epoch == 0 && k.fold == nil:
		return fail("loaded before the activation, not folding")
	case k.phase.ending() && waiting > 0:
		return fail("requests waiting in an ending phase")
	case k.phase == phaseRefusing && k.refusal == nil:
		return fail("refusing without a refusal")
	case k.phase == phaseStopped && w != nil:
		return fail("stopped with a write in flight")
	}
	return nil
}
