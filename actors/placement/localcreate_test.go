package placement_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
)

// startMemberBesideGhost starts a member whose topology also holds a
// ghost member hosting the session and plan kinds (it owns about half of
// all ids, and never answers).
func startMemberBesideGhost(t *testing.T) (*oneMember, *ghost) {
	t.Helper()
	g := newGhost(t, "ghost")
	g.member.Kinds = []string{session.ClusterKind, plan.ClusterKind}
	m := startMember(t, nil, func(c *remote.Config) { c.MaxRetryCount = 1 })
	host, port, err := net.SplitHostPort(m.sys.Address())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	self := &cluster.Member{Host: host, Port: int32(p), Id: m.sys.ID, Kinds: []string{session.ClusterKind, plan.ClusterKind}}
	publish(m, []*cluster.Member{self, g.member}, g.member, nil)
	return m, g
}

// A create without a client-chosen id gets an id the member it reached
// owns, so it is not forwarded: with a second member in the topology that
// never answers (and owns about half of all ids), every such create is
// served here, nothing is sent to the other member, and each id is one
// Local places here.
func TestCreateWithoutIDStaysOnItsMember(t *testing.T) {
	m, g := startMemberBesideGhost(t)
	here := 0
	for range 64 {
		if m.router.Local(session.ClusterKind, ids.New()) {
			here++
		}
	}
	if here == 0 || here == 64 {
		t.Fatalf("%d of 64 new ids placed here with two members; want some on each", here)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 16 {
		resp, err := m.node.Sessions().Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "a"})
		if err != nil {
			t.Fatalf("create %d: %v (ghost %s self %s)", i, err, g.member.Address(), m.sys.Address())
		}
		if id := resp.GetSession().GetSessionId(); !m.router.Local(session.ClusterKind, id) {
			t.Fatalf("create %d got id %s, which the other member owns", i, id)
		}
	}
	select {
	case <-g.accepted:
		t.Fatal("a create was sent to the other member")
	default:
	}
}
