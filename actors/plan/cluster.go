package plan

import (
	"context"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// ClusterKind is the Proto.Actor cluster kind plan actors are registered
// under; the cluster identity is the plan id.
const ClusterKind = "plan"

// Router is the one router of every kind of owner (directory.Router).
type Router = directory.Router

// ClusterProps are the props of the plan owner as a cluster kind (see
// package placement and directory.OwnerSpec.KindProps): the same owner as
// a directory's child, learning its plan id from *cluster.ClusterInit,
// accepting bare planv1 requests from any sender (admitted like every
// request, answered with the response or a *commonv1.Error), passivating
// itself when idle, and moving out — its write in flight answered with its
// real outcome — when the cluster poisons it.
func (s *Service) ClusterProps() *actor.Props { return s.env.owners.KindProps() }

// FencedActivations is how many plan activations found a newer one had
// taken their plan (the store fenced their write; they answered
// UNAVAILABLE and stopped).
func (s *Service) FencedActivations() int64 { return s.env.owners.Fenced.Load() }

// route sends a write to its plan actor through r (cluster mode).
func (s *Service) route(ctx context.Context, r Router, id string, msg proto.Message) (proto.Message, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return r.Route(ctx, ClusterKind, id, msg)
}

func errStopped() error { return errs.Unavailable("the plans service is stopped") }
