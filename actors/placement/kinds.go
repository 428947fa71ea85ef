package placement

import (
	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/session"
	"github.com/asynkron/protoactor-go/cluster"
)

// Kinds returns the cluster kinds of sessions' and plans' actors, for
// cluster.Configure(..., cluster.WithKinds(Kinds(s, p)...)). The services
// provide the actors' store reader, the writer and limits; start them
// with Config.Router set to the Router bound to the same cluster, so that
// their façades route writes through it.
func Kinds(sessions *session.Service, plans *plan.Service) []*cluster.Kind {
	return []*cluster.Kind{
		cluster.NewKind(session.ClusterKind, sessions.ClusterProps()),
		cluster.NewKind(plan.ClusterKind, plans.ClusterProps()),
	}
}
