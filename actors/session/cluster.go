package session

import (
	"context"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/protobuf/proto"
)

// ClusterKind is the Proto.Actor cluster kind session actors are registered
// under; the cluster identity is the session id.
const ClusterKind = "session"

// Router is the one router of every kind of owner (directory.Router).
type Router = directory.Router

// routed sends a normalised write to its owner: through Config.Router when
// one is set (cluster mode), else through this process's owners.
// owner is the key of msg's session owner, or why msg cannot be routed
// now (the node is stopping; msg names no session).
func (s *Service) owner(msg proto.Message) (string, error) {
	if s.closing.Load() {
		return "", errUnavailableStopping()
	}
	id, ok, err := routeKey(msg) // gives a create without an id its id
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errs.Internal("session façade routed %T, which has no owner", msg)
	}
	return id, nil
}

// localIDTries bounds the ids a create draws to find one this member
// owns: with N members each is one with probability 1/N, so 32 tries miss
// once in 2^32 with two members and about once in 30 with ten (then the
// create is forwarded, as any request of a client-chosen id is).
const localIDTries = 32

// newLocalID returns a new session id that the cluster places on this
// member when it knows (Router is a directory.Placer), so that a create
// without a client-chosen id costs no forwarding: the owner lookup, the
// request and its answer stay in this process. Any new id will do: the
// id's only promise is uniqueness.
func (s *Service) newLocalID() string {
	id := ids.New()
	p, ok := s.env.cfg.Router.(directory.Placer)
	if !ok {
		return id
	}
	for i := 1; i < localIDTries && !p.Local(ClusterKind, id); i++ {
		id = ids.New()
	}
	return id
}

func routed[T proto.Message](ctx context.Context, s *Service, msg proto.Message) (T, error) {
	var zero T
	id, err := s.owner(msg)
	if err != nil {
		return zero, err
	}
	r := s.env.cfg.Router
	if r == nil {
		return call[T](ctx, s, id, msg)
	}
	ctx, cancel := context.WithTimeout(ctx, s.env.cfg.AskTimeout)
	defer cancel()
	resp, err := r.Route(ctx, ClusterKind, id, msg)
	if err != nil {
		return zero, err
	}
	return directory.Answer[T]("session", resp)
}
