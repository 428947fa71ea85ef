package plan

import (
	"context"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"
)

// ClusterKind is the Proto.Actor cluster kind plan actors are registered
// under; the cluster identity is the plan id.
const ClusterKind = "plan"

// Router carries a write to the actor that owns id when owners do not live
// in this process's directory (cluster mode). It returns the owner's
// response or a typed error; it may retry within ctx's deadline (a fenced
// or lost write stored nothing, so a retry records it once). It must not
// keep msg.
type Router interface {
	Route(ctx context.Context, kind, id string, msg proto.Message) (proto.Message, error)
}

// ClusterProps are the props of the plan actor as a cluster kind (see
// package placement). Such an actor learns its plan id from
// *cluster.ClusterInit and only then activates, accepts bare planv1 requests
// from any sender (admitted into this node's writer backlog, answered with
// the response or a *commonv1.Error), and passivates itself when idle: it
// has no directory. A PoisonPill (the cluster moving the plan elsewhere)
// does not stop it before its write in flight is answered (moveOut).
func (s *Service) ClusterProps() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &owner{env: s.env, standalone: true, admit: s.backlog.TryAdmit,
			serveRead: s.serveRead}
	}, actor.WithReceiverMiddleware(poisonAsMoveOut))
}

// moveOut is what a cluster kind's actor receives in place of a
// PoisonPill. The cluster poisons an activation when a topology change
// gives its identity to another member (and when the member leaves).
// A poisoned actor stops at once: a write it handed to the audit writer
// still commits, but its caller could only be told "stopped", which a
// router retries as "nothing stored" — the same RecordError stored twice.
// So the actor moves out instead: it refuses new and queued requests
// (nothing of them was stored; UNAVAILABLE, retried at the new owner),
// answers the write in flight with its real outcome, then stops.
type moveOut struct{}

func poisonAsMoveOut(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(*actor.PoisonPill); ok {
			env = &actor.MessageEnvelope{Header: env.Header, Message: moveOut{}, Sender: env.Sender}
		}
		next(c, env)
	}
}

// moveOut ends this activation once its write in flight is answered.
func (o *owner) moveOut(ctx actor.Context) {
	if o.broken == nil {
		o.broken = errs.Unavailable("plan %s is moving to another member; retry", o.planID)
	}
	o.fail(o.queue, o.broken)
	o.queue = nil
	for _, c := range o.pending {
		c.Replier.Reply(nil, o.broken)
	}
	o.pending = nil
	o.passivating = true
	o.stopIfDone(ctx)
}

// abandon gives up answering r: a *directory.PIDReplier's caller (a
// future) times out, and its backlog slot is released here.
func abandon(r directory.Replier) {
	if p, ok := r.(*directory.PIDReplier); ok && p.Done != nil {
		p.Done()
	}
}

// FencedActivations is how many plan activations found a newer one had
// taken their plan (the store fenced their write; they answered
// UNAVAILABLE and stopped).
func (s *Service) FencedActivations() int64 { return s.env.fenced.Load() }

// clusterInit takes the actor's identity and activates. The cluster
// delivers it right after Started, before any request.
func (o *owner) clusterInit(ctx actor.Context, m *cluster.ClusterInit) {
	if m.Identity != nil {
		o.planID = m.Identity.Identity
	}
	o.activate(ctx)
}

// acceptBare takes a bare request from a remote or future sender, as the
// directory does for its own such senders.
func (o *owner) acceptBare(ctx actor.Context, m proto.Message) {
	sender := ctx.Sender()
	if sender == nil {
		return // nobody to answer; a request must be asked, not sent
	}
	r := &directory.PIDReplier{Root: ctx.ActorSystem().Root, To: sender}
	if o.admit != nil {
		release, err := o.admit(m)
		if err != nil {
			r.Reply(nil, err)
			return
		}
		r.Done = release
	}
	id, routed, err := planKey(m)
	switch {
	case err != nil:
		r.Reply(nil, err)
	case !routed:
		// Reads need no owner: served as the directory serves them (on
		// their own goroutine, on the reader), so a request works the
		// same whichever way it reached the node.
		go o.serveRead(&directory.Call{Msg: m, Replier: r})
	case id != o.planID:
		// The identity is the plan id: a write naming another plan
		// reached the wrong actor.
		r.Reply(nil, errs.InvalidArgument("plan actor %s cannot serve %s for plan %q: send it to that plan's identity",
			o.planID, m.ProtoReflect().Descriptor().Name(), id))
	default:
		o.call(ctx, &directory.Call{Msg: m, Replier: r})
	}
}

// route sends a write to its plan actor through r (cluster mode).
func (s *Service) route(ctx context.Context, r Router, msg proto.Message) (proto.Message, error) {
	id, ok, err := planKey(msg)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errs.Internal("plan façade routed %T, which has no owner", msg)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return r.Route(ctx, ClusterKind, id, msg)
}
