// Package lifecycle owns the protocol every owner of an identity follows
// (a session's owner, a plan's owner), once: activate, load, queue in
// arrival order, one write in flight, coalesce what arrived meanwhile,
// apply the result, fence, passivate. It is a pure state machine in the
// style of etcd-io/raft's Ready: a Kernel is stepped with events (a
// request arrived, a write was applied, the state was loaded, an idle
// tick, passivate, move out, stopped) and hands back effects (Ready:
// replies, at most one write to submit, a load to make, ask to be
// passivated, stop). It holds no actor.Context and makes no I/O, so its
// protocol is specified by the scripts in testdata, run without an actor
// system or a store.
//
// What differs between owners is a Domain: the owner's state, how it
// decides the command of a write, what a result means. The kernel calls
// it; it never calls the kernel.
//
// The kernel's state is one phase (phase.go), whose invariants the
// scripts' runner checks after every event. Two paths end one write in
// more than one step: Outcome.Requeue (a plan's retries, testdata/requeue)
// and Outcome.Continue (a session's chunked truncation, testdata/continue).
//
// Invariants the Kernel keeps (each is a script in testdata):
//   - at most one write is in flight (Ready.Submit is nil while one is);
//   - nothing is decided before the owner's activation (its first write,
//     which takes the epoch) committed, and before the state was loaded
//     after it: so the load sees every write of an earlier owner that can
//     still commit, and its later writes are fenced. A Folding domain
//     (testdata/folding) loads first and decides its first run before the
//     activation, but its write carries the activation, and the store
//     refuses both unless the state still stands as loaded once the epoch
//     is taken: so what it answers after that write committed is what a
//     load after the activation would have decided. Its only other
//     answers before it, refusals that store nothing, are made against a
//     load made after they arrived. A Blind run (testdata/blind) is
//     decided with no load at all: the store decides in the folded write
//     what a load would have told (or refuses it) and reports it; until
//     a load, only Partly requests are decided on that partial state. A
//     folded write that fails answers nothing: its requests are decided
//     again on the path above;
//   - requests are accepted and decided in arrival order; a request that
//     arrives while a write is in flight waits, and rides in the next
//     write if the domain lets it share one (coalescing: the leading run
//     of queued Batched requests, within the domain's Limits; a Leads
//     request only heads a write; an Alone request is a write of its own);
//   - the commit window (window.go): after a write that opted in
//     (Write.Window) committed, the next write waits for the callers it
//     answered to come back — until its run is as long as that write
//     plus what queued behind it, or the window's timer fires (Ready.Hold,
//     then WindowClosed), at most Write.Window and as long as the write
//     took. Never for a lone caller, a run that cannot grow or is full,
//     after a failed write, or while passivating. Time stays outside:
//     the shell says how long a write took and starts the timer;
//   - a write the store fenced ends the activation: its requests, the
//     queued ones and every later one are answered UNAVAILABLE (nothing of
//     them was stored) and the owner asks to be passivated;
//   - a failed write whose error leaves memory in doubt (Outcome.Stale)
//     makes the kernel load the state again before the next decision;
//     a load is made only with nothing in flight, so it sees the
//     outcome of every write the owner submitted (testdata/blind);
//   - every request gets exactly one reply, also when the owner is
//     stopped: a write in flight OUTCOME_UNKNOWN (it may still commit),
//     everything else UNAVAILABLE (it was not stored);
//   - passivation: an owner idle for one idle tick with nothing waiting
//     asks to be passivated (once); told to passivate, it stops as soon
//     as nothing is in flight or waiting; requests arriving before it
//     stopped are served first.
package lifecycle
