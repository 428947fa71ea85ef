package placement_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/placement"
	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The router names an owner's member only when that owner, on another
// member, answered: a request served here names none, and neither does one
// whose owner's member (which published its address) never answers. The
// positive case needs a second real member: tests/cluster
// (TestClusterOwnerHeader).
func TestOwnerHintOnlyForAnsweredRemoteOwners(t *testing.T) {
	m, g := startMemberBesideGhost(t)
	addr, err := anypb.New(wrapperspb.String("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	m.sys.EventStream.Publish(&cluster.GossipUpdate{MemberID: g.member.Id, Key: placement.GRPCAddrKey, Value: addr, SeqNumber: 1})

	var local, remote string
	for local == "" || remote == "" {
		id := ids.New()
		if m.router.Local(session.ClusterKind, id) {
			local = id
		} else {
			remote = id
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hctx, sink := directory.WithOwnerSink(ctx)
	if _, err := m.node.Sessions().Create(hctx, &sessionv1.CreateSessionRequest{SessionId: local, ActorName: "a"}); err != nil {
		t.Fatalf("create %s here: %v", local, err)
	}
	if got := sink.Owner(); got != "" {
		t.Fatalf("a session served here named owner %q", got)
	}
	rctx, rcancel := context.WithTimeout(hctx, 1500*time.Millisecond)
	defer rcancel()
	if _, err := m.node.Sessions().Create(rctx, &sessionv1.CreateSessionRequest{SessionId: remote, ActorName: "a"}); err == nil {
		t.Fatalf("create %s on a member that never answers succeeded", remote)
	}
	if got := sink.Owner(); got != "" {
		t.Fatalf("an owner that never answered was named: %q", got)
	}
}
