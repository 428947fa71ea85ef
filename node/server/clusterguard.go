package server

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// The traffic of a protoactor-go cluster member (automanaged provider,
// disthash identity lookup) in this module version, read from its source
// (cluster/gossip_actor.go, cluster/member_list.go BroadcastEvent,
// identitylookup/disthash) and checked against a running cluster:
//
//   - gossip between members: cluster.GossipRequest to "gossip", answered
//     with cluster.GossipResponse to the requester's future; the state it
//     carries (each member's gRPC address among it: placement.GRPCAddrKey,
//     a wrapperspb.StringValue) is Any values, decoded only by who reads
//     their key, never by the remote's reader;
//   - placement: cluster.ActivationRequest to "partition-activator",
//     answered with cluster.ActivationResponse to a future;
//   - cluster.ActivationTerminated broadcast to "eventstream";
//   - grain requests: agentstate messages to an activation, a child of the
//     partition activator ("partition-activator/<identity>$<n>"), answered
//     with agentstate messages (or a commonv1.Error) to a future;
//   - actor.DeadLetterResponse to a future, when a request's target has
//     gone (the caller then retries elsewhere at once).
//
// Everything else, system messages (Stop, Watch, PoisonPill) included,
// stays refused.
var clusterTargets = map[string]string{
	"gossip":              "cluster.GossipRequest",
	"partition-activator": "cluster.ActivationRequest",
	"eventstream":         "cluster.ActivationTerminated",
}

var futureTypes = map[string]bool{
	"cluster.GossipResponse":     true,
	"cluster.ActivationResponse": true,
	"actor.DeadLetterResponse":   true,
}

// clusterTraffic reports whether a message of typeName to the local actor
// id is cluster traffic this node accepts.
func clusterTraffic(typeName, id string) bool {
	if _, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(typeName)); err != nil {
		return false // never hand the reader a type it cannot decode
	}
	agentstate := strings.HasPrefix(typeName, typePrefix)
	switch {
	case clusterTargets[id] != "":
		return clusterTargets[id] == typeName
	case strings.HasPrefix(id, "future$"):
		return agentstate || futureTypes[typeName]
	case strings.HasPrefix(id, "partition-activator/"):
		return agentstate
	}
	return false
}
