package session

import (
	"context"

	"github.com/agentstate/agentstate/actors/lifecycle"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

// owner is the session's domain in the owner kernel (actors/lifecycle): what
// the one owner of a session decides. The kernel holds its lifecycle — the
// epoch and fencing, the one write in flight, arrival order, coalescing,
// passivation — and the actor shell (directory.OwnerSpec) carries out its
// effects. The session's next sequence is decided in one function,
// persistence's AppendMessages.DecideSequence: by startAppends (writes.go) on
// the head a warm owner holds, and inside the store's activation on the head
// it read for a cold owner's blind append (startBlind).
//
// Invariants:
//   - sess.MessageCount is the next sequence: the stored maximum + 1, as of
//     the last committed write. It advances only on a committed result;
//   - memory changes only in the finish functions of a write, and only for
//     what committed;
//   - stale is set, during one Applied, when a result says memory and
//     store may differ; the kernel then loads the session again before
//     anything is decided.
type owner struct {
	id  string
	env *env

	sess  *sessionv1.Session // nil: the session does not exist
	state string             // the session's state (JSON object) as last committed

	epoch int64              // the kernel's, for the commands built now
	ans   *lifecycle.Answers // where the call being served answers
	next  *lifecycle.Write   // the write a decision built
	stale bool
	// loaded: this owner loaded its session at least once. Before that,
	// an append run is decided blind (writes.go) and sess, after its
	// commit, holds only what the store reported (partial).
	loaded  bool
	partial bool // set during one Applied: lifecycle.Outcome.Partial
}

var _ lifecycle.Domain = (*owner)(nil)

func newOwner(id string, e *env) *owner { return &owner{id: id, env: e} }

func (o *owner) Describe() (string, string) { return "session", o.id }

// Activate: see fencing.go.
func (o *owner) Activate() persistence.Command {
	return &persistence.Activate{Kind: persistence.OwnerSession, ID: o.id}
}

// Folding (lifecycle.Folding): a cold session's first append run is
// decided with no load at all and carried by the activation: the store
// reads the session inside that command, numbers the appends and applies
// their deltas to the stored state, and reports what it read
// (persistence.Activate, Result.Head); a conditional append is decided
// against a load made before the activation; a create, by a fresh owner,
// is decided with no load (the store refuses it when the session exists).
// Issue 17: a passivated session's append took an activation write, a
// load and the append's write; then a load on the read-only pool, whose
// page cache every commit invalidates, and one write (a fifth of W4's
// CPU was that load).
var _ lifecycle.Folding = (*owner)(nil)

func (o *owner) Folds(r *lifecycle.Request) bool {
	if _, ok := r.Msg.(*sessionv1.CreateSessionRequest); ok {
		return true
	}
	_, ok := asAppend(r.Msg)
	return ok
}

func (o *owner) Blind(r *lifecycle.Request) bool {
	if _, ok := r.Msg.(*sessionv1.CreateSessionRequest); ok {
		return true
	}
	a, ok := asAppend(r.Msg)
	return ok && a.ExpectedNextSequence == nil && !o.env.cfg.AuditMessages
}

// Partly: after a blind append committed, the owner knows the session's
// next sequence and state and that it is active: enough to decide appends
// (conditional ones too); anything else waits for a load. With
// Config.AuditMessages an append is never blind: its audit entries name
// the session's actor, which only a load tells.
func (o *owner) Partly(r *lifecycle.Request) bool {
	_, ok := asAppend(r.Msg)
	return ok && !o.env.cfg.AuditMessages
}

// Fold: the store applies cmd as the new epoch's write, and only while
// the session stands as loaded: its next sequence and updated_at, which
// every write of an owner moves.
func (o *owner) Fold(cmd persistence.Command, loaded bool) persistence.Command {
	a := &persistence.Activate{Kind: persistence.OwnerSession, ID: o.id, Then: cmd}
	if loaded {
		a.Loaded = &persistence.SessionMark{}
		if o.sess != nil {
			a.Loaded = &persistence.SessionMark{Exists: true, NextSequence: o.sess.MessageCount, UpdatedAt: o.sess.GetUpdatedAt().AsTime()}
		}
	}
	return a
}

// Accept validates a request that did not come through the façade (a
// remote or future sender: the façade's are normalised already).
func (o *owner) Accept(r *lifecycle.Request, a *lifecycle.Answers) bool {
	if r.Checked {
		return true
	}
	msg, err := normalize(r.Msg, o.env.cfg)
	if err != nil {
		a.Reply(r, nil, err)
		return false
	}
	r.Msg = msg
	return true
}

// Batching: appends share a write (one Turn each); a conditional append is
// decided against the committed next sequence, so it leads its write (the
// turns carried before it could turn out to be retries, which store
// nothing). Every other request is a write of its own, decided in arrival
// order: an append queued behind a close is refused.
func (o *owner) Batching(r *lifecycle.Request) (lifecycle.Batching, int) {
	a, ok := asAppend(r.Msg)
	if !ok {
		return lifecycle.Alone, 0
	}
	n := 0
	for _, m := range a.Messages {
		n += len(m.Content) + len(m.MetadataJson)
	}
	if a.ExpectedNextSequence != nil {
		return lifecycle.Leads, n
	}
	return lifecycle.Batched, n
}

func (o *owner) Limits() (int, int) { return maxTurnsPerWrite, maxBytesPerWrite }

// Decide builds the write of run: the coalesced appends, or one other
// request.
func (o *owner) Decide(run []*lifecycle.Request, epoch int64, a *lifecycle.Answers) *lifecycle.Write {
	o.ans, o.epoch, o.next = a, epoch, nil
	if _, ok := asAppend(run[0].Msg); ok {
		o.startAppends(run)
	} else {
		o.startOne(run[0])
	}
	w := o.next
	o.next = nil
	return w
}

// Applied runs the write's finish function; a finish that builds another
// write (the next chunk of a truncation) continues the same request.
func (o *owner) Applied(w *lifecycle.Write, res persistence.Result, a *lifecycle.Answers) lifecycle.Outcome {
	o.ans, o.next, o.stale, o.partial = a, nil, false, false
	w.Data.(func(persistence.Result))(res)
	out := lifecycle.Outcome{Stale: o.stale, Partial: o.partial}
	if n := o.next; n != nil {
		out.Continue, out.ContinueData = n.Cmd, n.Data
		o.next = nil
	}
	return out
}

func (o *owner) Refuse(r *lifecycle.Request, err error, a *lifecycle.Answers) { a.Reply(r, nil, err) }

// Rebase: nothing is derived from the queue; requests are decided when
// their write starts.
func (o *owner) Rebase([]*lifecycle.Request) {}

func (o *owner) Owns() bool { return o.sess != nil }

// Load reads the session from the store: first (before the activation,
// which the first write carries: Fold) unless the first run is Blind,
// after an activation taken alone, before a request that a partial state
// cannot decide (Partly), and after a write failed in a way that means
// memory and store may differ. Every write of a previous owner of this id is visible: the
// directory spawns us only after it terminated, and it answered only
// after commit. An owner in another directory may still live; a load
// after our Activate committed sees what it committed before, and what it
// writes after is fenced; a load before it is checked by the store when
// the folded write commits (persistence.Activate.Loaded).
func (o *owner) Load() error {
	ctx, cancel := context.WithTimeout(context.Background(), o.env.cfg.AskTimeout)
	defer cancel()
	s, err := o.env.reader.GetSession(ctx, o.id)
	var state string
	if err == nil {
		// The state is read after the session: both are this owner's,
		// and nothing writes them while it loads (see above).
		state, _, err = o.env.reader.GetSessionState(ctx, o.id)
	}
	switch {
	case err == nil:
		o.sess, o.state = s, state
	case errs.CodeOf(err) == errs.NotFoundCode:
		o.sess, o.state = nil, ""
	default:
		return err
	}
	o.loaded = true
	return nil
}

func (o *owner) reply(r *lifecycle.Request, resp proto.Message, err error) { o.ans.Reply(r, resp, err) }

// submit makes cmd the write of carried; finish runs with its result.
func (o *owner) submit(carried []*lifecycle.Request, cmd persistence.Command, finish func(persistence.Result)) {
	o.next = &lifecycle.Write{Cmd: cmd, Carried: carried, Data: finish}
}

func (o *owner) submitOne(r *lifecycle.Request, cmd persistence.Command, finish func(persistence.Result)) {
	o.submit([]*lifecycle.Request{r}, cmd, finish)
}

func (o *owner) snapshot() *sessionv1.Session { return cloneSession(o.sess) }

func (o *owner) notFound() error { return errs.NotFound("session %s does not exist", o.id) }
