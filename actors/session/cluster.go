package session

import (
	"context"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/messages/errs"
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
