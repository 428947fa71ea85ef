package placement

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// GRPCAddrKey is the gossip state key under which each member publishes
// the address its gRPC API is reached at (a wrapperspb.StringValue,
// host:port; Member.PublishGRPCAddr). Other members read it to tell a
// client which member owns the session or plan it asked for
// (directory.NoteOwner).
const GRPCAddrKey = "agentstate-grpc-addr"

// PublishGRPCAddr publishes addr, this member's gRPC address, to the
// cluster through gossip (GRPCAddrKey). Peers learn it within a gossip
// round or two; until then they give clients no hint for this member.
func (m *Member) PublishGRPCAddr(addr string) {
	m.Cluster.Gossip.SetState(GRPCAddrKey, wrapperspb.String(addr))
}

// grpcAddrs maps a member's remote (actor system) address — the Address
// of the PIDs a Router resolves — to the gRPC address that member
// published. Lookups read one immutable map (no lock, no allocation); it
// is rebuilt when the topology changes or a member's published address
// arrives by gossip, both rare.
type grpcAddrs struct {
	mu sync.Mutex
	// ids is the latest topology: remote address → member id.
	ids map[string]string
	// published is what members published: member id → address and its
	// gossip sequence number (a late seed must not undo a newer update).
	published map[string]publishedAddr
	byRemote  atomic.Pointer[map[string]string]
	subscription
}

type publishedAddr struct {
	addr string
	seq  int64
}

// lookup returns the gRPC address of the member at remote ("" when it is
// not in the topology or published none yet).
func (g *grpcAddrs) lookup(remote string) string {
	if m := g.byRemote.Load(); m != nil {
		return (*m)[remote]
	}
	return ""
}

// setMembers records the topology's members.
func (g *grpcAddrs) setMembers(members []*cluster.Member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ids = make(map[string]string, len(members))
	live := make(map[string]bool, len(members))
	for _, m := range members {
		g.ids[m.Address()] = m.Id
		live[m.Id] = true
	}
	// A member id is per start, so the addresses of members that left
	// are dropped — only once they outnumber the members, because gossip
	// may bring a joining member's address before the topology that holds
	// it (a hint dropped so is only a hint not given).
	if len(g.published) > 2*len(members)+prunedAbove {
		for id := range g.published {
			if !live[id] {
				delete(g.published, id)
			}
		}
	}
	g.rebuild()
}

// prunedAbove is how many departed members' addresses grpcAddrs keeps
// beyond twice the topology's size.
const prunedAbove = 16

// publish records the gRPC address member id published, unless a newer
// one (a higher sequence number) is known. It is kept although the member
// is not in the topology yet: gossip may bring it first.
func (g *grpcAddrs) publish(id, addr string, seq int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.published == nil {
		g.published = make(map[string]publishedAddr)
	}
	if p, ok := g.published[id]; ok && p.seq >= seq {
		return
	}
	g.published[id] = publishedAddr{addr, seq}
	g.rebuild()
}

// rebuild publishes a new lookup map from ids and published. g.mu is held.
func (g *grpcAddrs) rebuild() {
	m := make(map[string]string, len(g.ids))
	for remote, id := range g.ids {
		if p, ok := g.published[id]; ok {
			m[remote] = p.addr
		}
	}
	g.byRemote.Store(&m)
}

// gossiped records a gossip update of GRPCAddrKey (others are ignored).
func (g *grpcAddrs) gossiped(u *cluster.GossipUpdate) {
	if u.Key != GRPCAddrKey || u.Value == nil {
		return
	}
	var v wrapperspb.StringValue
	if err := u.Value.UnmarshalTo(&v); err != nil {
		return // not an address: no hint for that member
	}
	g.publish(u.MemberID, v.GetValue(), u.SeqNumber)
}

// watch subscribes g to es's topologies and gossip updates (once per
// stream). Subscribed before the member starts (StartMember), it misses
// no update; seed reads what was gossiped before a later subscription.
func (g *grpcAddrs) watch(es *eventstream.EventStream) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.follow(es, func(ev any) {
		switch e := ev.(type) {
		case *cluster.ClusterTopology:
			g.setMembers(e.Members)
		case *cluster.GossipUpdate:
			g.gossiped(e)
		}
	})
}

// seed reads the addresses c's gossip already holds, for a Router bound
// after the member started (their members are known from the next
// topology on, as the Router's own). It asks the gossip actor.
func (g *grpcAddrs) seed(c *cluster.Cluster) {
	state, err := c.Gossip.GetState(GRPCAddrKey)
	if err != nil {
		return // the updates that follow still fill it
	}
	for id, kv := range state {
		if kv == nil || kv.Value == nil {
			continue
		}
		g.gossiped(&cluster.GossipUpdate{MemberID: id, Key: GRPCAddrKey, Value: kv.Value, SeqNumber: kv.SequenceNumber})
	}
}
