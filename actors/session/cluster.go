package session

import (
	"context"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"
)

// ClusterKind is the Proto.Actor cluster kind session actors are registered
// under; the cluster identity is the session id.
const ClusterKind = "session"

// Router carries a write to the actor that owns id when owners do not live
// in this process's directory (cluster mode). It returns the owner's
// response or a typed error; it may retry within ctx's deadline, so msg
// must be safe to deliver more than once (session writes are: message ids
// make appends idempotent, a create names its id). It must not keep msg.
type Router interface {
	Route(ctx context.Context, kind, id string, msg proto.Message) (proto.Message, error)
}

// ClusterProps are the props of the session actor as a cluster kind (see
// package placement). Such an actor learns its session id from
// *cluster.ClusterInit, accepts bare sessionv1 requests from any sender
// (admitted into this node's writer backlog, answered with the response or a
// *commonv1.Error), and passivates itself when idle: it has no directory.
func (s *Service) ClusterProps() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &owner{env: s.env, stale: true, standalone: true, admit: s.admitRemote,
			unkeyed: s.unkeyed}
	})
}

// FencedActivations is how many session activations found a newer one
// had taken their session (the store fenced their write; they answered
// UNAVAILABLE and stopped). Expected after a member rejoins; a steady
// rise means members disagree about placement.
func (s *Service) FencedActivations() int64 { return s.env.fenced.Load() }

// clusterInit takes the actor's identity. The cluster delivers it right
// after Started, before any request.
func (o *owner) clusterInit(m *cluster.ClusterInit) {
	if m.Identity != nil {
		o.id = m.Identity.Identity
	}
}

// acceptBare queues a bare request from a remote or future sender, as the
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
	id, routed, err := routeKey(m)
	switch {
	case err != nil:
		r.Reply(nil, err)
	case !routed:
		// Reads and imports need no owner: served as the directory
		// serves them (on their own goroutine, on the reader), so a
		// request works the same whichever way it reached the node.
		go o.unkeyed(&directory.Call{Msg: m, Replier: r})
	case id != o.id:
		// The identity is the session id: a write naming another
		// session reached the wrong actor.
		r.Reply(nil, errs.InvalidArgument("session actor %s cannot serve %s for session %q: send it to that session's identity",
			o.id, m.ProtoReflect().Descriptor().Name(), id))
	default:
		o.accept(&directory.Call{Msg: m, Replier: r})
	}
}

// routed sends a normalised write to its owner: through Config.Router when
// one is set (cluster mode), else through this process's directory.
func routed[T proto.Message](ctx context.Context, s *Service, msg proto.Message) (T, error) {
	r := s.env.cfg.Router
	if r == nil {
		return call[T](ctx, s, msg)
	}
	var zero T
	if s.closing.Load() {
		return zero, errUnavailableStopping()
	}
	id, ok, err := routeKey(msg) // gives a create without an id its id
	if err != nil {
		return zero, err
	}
	if !ok {
		return zero, errs.Internal("session façade routed %T, which has no owner", msg)
	}
	ctx, cancel := context.WithTimeout(ctx, s.env.cfg.AskTimeout)
	defer cancel()
	resp, err := r.Route(ctx, ClusterKind, id, msg)
	if err != nil {
		return zero, err
	}
	out, ok := resp.(T)
	if !ok {
		return zero, errs.Internal("session actor answered %T, want %T", resp, zero)
	}
	return out, nil
}
