package session

import (
	"context"
	"errors"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/writer"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"
)

// owner is the actor that owns one session. It is the only code that
// decides the session's next sequence.
//
// Invariants:
//   - at most one write (one writer.Submit) is in flight: busy != nil;
//   - sess.MessageCount is the next sequence: the stored maximum + 1, as of
//     the last committed write. It advances only on a committed result;
//   - requests are decided in arrival order: a request waits in queue while
//     a write is in flight, and is checked against the state that write
//     left behind (an append queued behind a close is refused);
//   - stale means the in-memory state may differ from the store (never
//     loaded, or a write failed in a way that says so); the next request
//     reloads it before anything is decided;
//   - nothing is written or decided before epoch > 0: the actor's first
//     write is its Activate, and its state is loaded only after that
//     committed (see fencing.go). Every later write carries epoch;
//   - fenced: a write was refused because a newer activation owns the
//     session. Every request is refused from then on and the actor stops.
type owner struct {
	id  string
	env *env

	sess  *sessionv1.Session // nil: the session does not exist
	state string             // the session's state (JSON object) as last committed
	stale bool

	epoch  int64 // 0 until the activation committed
	fenced bool

	busy  *write
	queue []*request
	tag   uint64
	win   appendWindow

	passivating bool // the directory told us to stop
	idleAsked   bool // we asked the directory to passivate us

	// standalone: a cluster kind (cluster.go), with no directory parent.
	// It stops itself when idle, and admit (may be nil) and the release it
	// returns bracket each bare request it accepts.
	standalone bool
	admit      func(proto.Message) (release func(), err error)
	// unkeyed serves a cluster kind's requests that need no owner (reads,
	// imports), as the directory's Unkeyed does; it replies itself.
	unkeyed func(*directory.Call)
}

// request is one accepted Call with its normalised message.
type request struct {
	call *directory.Call
	msg  proto.Message
}

func (r *request) reply(resp proto.Message, err error) { r.call.Replier.Reply(resp, err) }

// write is the Submit in flight and what to do with its result. finish is
// called exactly once, with the audit actor's result or a failure.
type write struct {
	tag    uint64
	finish func(persistence.Result)
}

func newOwner(id string, e *env) actor.Actor {
	return &owner{id: id, env: e, stale: true}
}

func (o *owner) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		o.env.live.add(1)
		o.env.activations.Add(1)
		if o.env.cfg.IdleTimeout > 0 {
			ctx.SetReceiveTimeout(o.env.cfg.IdleTimeout)
		}
	case *directory.Call:
		o.accept(m)
		o.pump(ctx)
	case *writer.Applied:
		if o.busy == nil || m.Tag != o.busy.tag {
			return // not ours to finish: a stale reply
		}
		w := o.busy
		o.busy = nil
		o.win.finished(len(o.queue), m.Result.Err == nil)
		if errors.Is(m.Result.Err, persistence.ErrFenced) {
			o.fence(w)
		} else {
			w.finish(m.Result)
		}
		o.pump(ctx)
	case *actor.DeadLetterResponse:
		// A Submit reached no actor: the audit actor is gone, so the
		// write in flight can never be answered. (The only other
		// request this actor makes, Idle to its directory, is sent
		// when nothing is in flight.)
		if w := o.busy; w != nil {
			o.busy = nil
			o.win.finished(len(o.queue), false)
			w.finish(persistence.Result{Err: errs.Unavailable("session %s: the audit writer is not running", o.id)})
		}
		o.pump(ctx)
	case *actor.ReceiveTimeout:
		// The timer fires once; re-arm it so that an actor busy now
		// asks again later.
		ctx.SetReceiveTimeout(o.env.cfg.IdleTimeout)
		if o.idle() {
			o.askPassivation(ctx)
		}
	case *appendWindowClosed:
		o.closeAppendWindow(ctx, m)
	case *directory.Passivate:
		o.passivating = true
		o.pump(ctx)
	case *cluster.ClusterInit:
		o.clusterInit(m)
	case *actor.Stopped, *actor.Restarting:
		// Stopped without passivation (the directory was stopped) or
		// restarting after a panic: this incarnation ends here, and
		// whoever waits on it gets an answer. The write in flight was
		// submitted and may still commit: OUTCOME_UNKNOWN (retries with
		// message ids are safe). The queued requests were never
		// submitted: UNAVAILABLE, which promises exactly that.
		o.failAll(errs.OutcomeUnknown("session %s: the session actor stopped with this write in flight; it may still commit", o.id),
			errs.Unavailable("session %s: the session actor stopped; the request was not stored", o.id))
		o.env.live.add(-1)
	case proto.Message:
		// Only a cluster kind is sent bare requests; a directory wraps
		// them in a *directory.Call.
		if o.standalone {
			o.acceptBare(ctx, m)
			o.pump(ctx)
		}
	}
}

func (o *owner) idle() bool { return o.busy == nil && len(o.queue) == 0 }

func (o *owner) askPassivation(ctx actor.Context) {
	if o.standalone {
		// No directory: stop now. The cluster forgets this activation
		// as it stops; a later request activates a fresh one, which
		// takes a new epoch and reloads.
		if !o.passivating {
			o.passivating = true
			ctx.Stop(ctx.Self())
		}
		return
	}
	if !o.idleAsked && !o.passivating {
		o.idleAsked = true
		// Request, not Send: the directory knows the owner by sender.
		ctx.Request(ctx.Parent(), &directory.Idle{})
	}
}

// accept validates a call that did not come through the façade (a remote
// or future sender: the façade's calls are normalised already) and queues
// it.
func (o *owner) accept(c *directory.Call) {
	if o.fenced {
		c.Replier.Reply(nil, o.fencedErr())
		return
	}
	msg := c.Msg
	if _, ok := c.Replier.(*checkedReplier); !ok {
		var err error
		if msg, err = normalize(c.Msg, o.env.cfg); err != nil {
			c.Replier.Reply(nil, err)
			return
		}
	}
	o.queue = append(o.queue, &request{call: c, msg: msg})
	if f := o.env.afterAccept; f != nil {
		f(o.id, len(o.queue), o.busy != nil)
	}
}

// pump starts the next write when none is in flight, answering on the way
// every queued request that needs none, and stops the actor when it is
// told to and nothing is left.
func (o *owner) pump(ctx actor.Context) {
	for o.busy == nil && len(o.queue) > 0 {
		if o.epoch == 0 {
			o.activate(ctx)
			break
		}
		if o.stale {
			if err := o.load(); err != nil {
				// The store cannot tell us the state: refuse the
				// head request and try again with the next one.
				r := o.pop()
				r.reply(nil, err)
				continue
			}
		}
		if _, ok := asAppend(o.queue[0].msg); ok {
			if o.holdAppends(ctx) {
				break
			}
			o.startAppends(ctx)
		} else {
			o.startOne(ctx, o.pop())
		}
	}
	if !o.idle() {
		return
	}
	if o.passivating {
		ctx.Stop(ctx.Self())
		return
	}
	if o.sess == nil || o.fenced {
		// Nothing to own (no such session, nothing loaded because
		// every request was invalid, or a newer activation owns it):
		// do not hold an actor for the id.
		o.askPassivation(ctx)
	}
}

func (o *owner) pop() *request {
	r := o.queue[0]
	o.queue[0] = nil
	o.queue = o.queue[1:]
	if len(o.queue) == 0 {
		o.queue = nil
	}
	return r
}

// load reads the session from the store: this actor's state on activation,
// and after a write failed in a way that means memory and store may differ.
// Every write of a previous owner of this id is visible: the directory
// spawns us only after it terminated, and it answered only after commit.
// An owner in another directory may still live; but load runs only after
// our Activate committed, so what it committed before is visible and what
// it writes after is fenced.
func (o *owner) load() error {
	ctx, cancel := context.WithTimeout(context.Background(), o.env.cfg.AskTimeout)
	defer cancel()
	s, err := o.env.reader.GetSession(ctx, o.id)
	if err == nil {
		// The state is read after the session: both are this owner's,
		// and nothing writes them while it loads (see above).
		o.state, _, err = o.env.reader.GetSessionState(ctx, o.id)
	}
	switch {
	case err == nil:
		o.sess = s
	case errs.CodeOf(err) == errs.NotFoundCode:
		o.sess = nil
	default:
		return errs.Unavailable("session %s: loading its state: %v", o.id, err)
	}
	o.stale = false
	return nil
}

// submit hands cmd to the audit actor; finish runs when it was applied.
func (o *owner) submit(ctx actor.Context, cmd persistence.Command, finish func(persistence.Result)) {
	o.tag++
	o.busy = &write{tag: o.tag, finish: finish}
	ctx.Request(o.env.writerPID, &writer.Submit{Cmd: cmd, Tag: o.tag})
}

// failAll answers everything still pending — the write in flight with
// inFlight, every queued request with queued; after it the actor holds no
// request.
func (o *owner) failAll(inFlight, queued error) {
	if w := o.busy; w != nil {
		o.busy = nil
		w.finish(persistence.Result{Err: inFlight})
	}
	for len(o.queue) > 0 {
		o.pop().reply(nil, queued)
	}
}

func (o *owner) snapshot() *sessionv1.Session { return proto.Clone(o.sess).(*sessionv1.Session) }

func (o *owner) notFound() error { return errs.NotFound("session %s does not exist", o.id) }
