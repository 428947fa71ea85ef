package placement

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func members(ids ...string) []*cluster.Member {
	var out []*cluster.Member
	for i, id := range ids {
		out = append(out, &cluster.Member{Id: id, Host: "127.0.0.1", Port: int32(9000 + i)})
	}
	return out
}

func gossipAddr(t *testing.T, id, addr string, seq int64) *cluster.GossipUpdate {
	t.Helper()
	v, err := anypb.New(wrapperspb.String(addr))
	if err != nil {
		t.Fatal(err)
	}
	return &cluster.GossipUpdate{MemberID: id, Key: GRPCAddrKey, Value: v, SeqNumber: seq}
}

func TestGRPCAddrsMapsRemoteAddressesToPublishedAddresses(t *testing.T) {
	var g grpcAddrs
	if got := g.lookup("127.0.0.1:9000"); got != "" {
		t.Fatalf("empty map names %q", got)
	}
	// Gossip may bring an address before the topology that holds its member.
	g.gossiped(gossipAddr(t, "b", "10.0.0.2:7420", 1))
	if got := g.lookup("127.0.0.1:9001"); got != "" {
		t.Fatalf("a member not in the topology yet has address %q", got)
	}
	g.setMembers(members("a", "b"))
	if got := g.lookup("127.0.0.1:9001"); got != "10.0.0.2:7420" {
		t.Fatalf("member b at 127.0.0.1:9001: %q, want 10.0.0.2:7420", got)
	}
	if got := g.lookup("127.0.0.1:9000"); got != "" {
		t.Fatalf("member a published nothing, yet has %q", got)
	}
	g.gossiped(gossipAddr(t, "a", "10.0.0.1:7420", 1))
	if got := g.lookup("127.0.0.1:9000"); got != "10.0.0.1:7420" {
		t.Fatalf("member a: %q, want 10.0.0.1:7420", got)
	}

	// A newer address replaces an older one; a late, older one (seed after
	// an update) does not undo it.
	g.gossiped(gossipAddr(t, "b", "10.0.0.9:7420", 3))
	g.gossiped(gossipAddr(t, "b", "10.0.0.2:7420", 2))
	if got := g.lookup("127.0.0.1:9001"); got != "10.0.0.9:7420" {
		t.Fatalf("member b after updates: %q, want the newest 10.0.0.9:7420", got)
	}

	// Other keys, and values that are not strings, are ignored.
	g.gossiped(&cluster.GossipUpdate{MemberID: "a", Key: "topology", Value: mustAny(t, wrapperspb.String("x")), SeqNumber: 9})
	g.gossiped(&cluster.GossipUpdate{MemberID: "a", Key: GRPCAddrKey, Value: mustAny(t, wrapperspb.Int64(5)), SeqNumber: 9})
	g.gossiped(&cluster.GossipUpdate{MemberID: "a", Key: GRPCAddrKey, SeqNumber: 10})
	if got := g.lookup("127.0.0.1:9000"); got != "10.0.0.1:7420" {
		t.Fatalf("member a after foreign updates: %q, want 10.0.0.1:7420", got)
	}

	// A member that left has no address any more.
	g.setMembers(members("a"))
	if got := g.lookup("127.0.0.1:9001"); got != "" {
		t.Fatalf("departed member b still has %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = g.lookup("127.0.0.1:9000") }); n != 0 {
		t.Fatalf("lookup allocates %v times", n)
	}
}

func TestGRPCAddrsForgetsDepartedMembersPastTheBound(t *testing.T) {
	var g grpcAddrs
	g.setMembers(members("live"))
	g.gossiped(gossipAddr(t, "live", "10.0.0.1:7420", 1))
	for i := range 2 + prunedAbove + 1 {
		g.gossiped(gossipAddr(t, fmt.Sprintf("gone-%d", i), "10.0.0.2:7420", 1))
	}
	g.setMembers(members("live"))
	if len(g.published) != 1 {
		t.Fatalf("%d addresses kept, want only the live member's", len(g.published))
	}
	if got := g.lookup("127.0.0.1:9000"); got != "10.0.0.1:7420" {
		t.Fatalf("live member: %q, want 10.0.0.1:7420", got)
	}
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	v, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
