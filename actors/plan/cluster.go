package plan

import (
	"context"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/protobuf/proto"
)

// ClusterKind is the Proto.Actor cluster kind plan actors are registered
// under; the cluster identity is the plan's persistence.PlanKey (its
// namespace and id).
const ClusterKind = "plan"

// Router is the one router of every kind of owner (directory.Router).
type Router = directory.Router

// route sends a write to its plan actor through r (cluster mode).
func (s *Service) route(ctx context.Context, r Router, id string, msg proto.Message) (proto.Message, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return r.Route(ctx, ClusterKind, id, msg)
}

func errStopped() error { return errs.Unavailable("the plans service is stopped") }
