package placement_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/placement"
	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/session"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
)

// liveGhost is a member's remote that completes the connection handshake
// and takes every message without answering, until killed (its server
// stopped, its port closed: a SIGKILL as its peers see it).
type liveGhost struct {
	remote.UnimplementedRemotingServer
	member   *cluster.Member
	srv      *grpc.Server
	received chan struct{} // one value per message batch taken
}

func newLiveGhost(t *testing.T, name string) *liveGhost {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &liveGhost{srv: grpc.NewServer(), received: make(chan struct{}, 16)}
	g.member = &cluster.Member{Host: "127.0.0.1", Port: int32(lis.Addr().(*net.TCPAddr).Port), Id: name, Kinds: []string{"scripted"}}
	remote.RegisterRemotingServer(g.srv, g)
	go g.srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(g.srv.Stop)
	return g
}

func (g *liveGhost) Receive(stream remote.Remoting_ReceiveServer) error {
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		switch msg.GetMessageType().(type) {
		case *remote.RemoteMessage_ConnectRequest:
			if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectResponse{
				ConnectResponse: &remote.ConnectResponse{MemberId: g.member.Id}}}); err != nil {
				return err
			}
		case *remote.RemoteMessage_MessageBatch:
			select {
			case g.received <- struct{}{}:
			default:
			}
		}
	}
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

// A request to a member that was killed, sent after its connection broke,
// waits in a new endpoint writer that cannot connect: it never left this
// process, so the attempt is UNAVAILABLE and the Router retries it (here
// on the member that owns the id once the cached PID is dropped). A
// request that did reach a member that never answers stays
// OUTCOME_UNKNOWN, and is not retried.
func TestRouterRetriesARequestAKilledMemberNeverGot(t *testing.T) {
	s := &scripted{received: map[string]int{}}
	// One connection attempt per writer (the library sleeps 2 s after
	// each failed one, and shutting down waits for that). No gossip: the
	// library marshals its gossip state while changing it (a data race),
	// which only shows with a peer that connects.
	noGossip := func(c *cluster.Config) { c.GossipInterval = time.Hour }
	m := startMemberWith(t, []*cluster.Kind{s.kind()}, []cluster.ConfigOption{noGossip}, func(c *remote.Config) { c.MaxRetryCount = 1 })
	g := newLiveGhost(t, "ghost") // after the remote set gRPC's global logger
	host, port, err := net.SplitHostPort(m.sys.Address())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	self := &cluster.Member{Host: host, Port: int32(p), Id: m.sys.ID,
		Kinds: []string{session.ClusterKind, plan.ClusterKind, "scripted"}}
	r := placement.NewRouter(placement.RouterConfig{AttemptTimeout: 500 * time.Millisecond})
	r.Bind(m.cluster)
	// Subscribed after the Router: it has seen an event once this has.
	terminated := make(chan struct{}, 8)
	m.sys.EventStream.Subscribe(func(ev any) {
		if e, ok := ev.(*remote.EndpointTerminatedEvent); ok && e.Address == g.member.Address() {
			select {
			case terminated <- struct{}{}:
			default:
			}
		}
	})
	members := []*cluster.Member{self, g.member}
	publish(m, members, g.member, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ok := &commonv1.Error{Message: "ok"}
	onGhost := func(id string) {
		m.cluster.PidCache.Set(id, "scripted", actor.NewPID(g.member.Address(), "partition-activator/"+id))
	}

	// 1. Delivered, never answered.
	sent := ids.New()
	onGhost(sent)
	_, err = r.Route(ctx, "scripted", sent, ok)
	waitFor(t, g.received, "the ghost receiving the request")
	if !errors.Is(err, errs.ErrOutcomeUnknown) || r.Retries() != 0 {
		t.Fatalf("a request the member got and never answered: %v after %d retries, want OUTCOME_UNKNOWN, no retry", err, r.Retries())
	}

	// 2. Killed; the next request to it is never sent, and is retried.
	g.srv.Stop()
	waitFor(t, terminated, "the connection's end")
	rdv := cluster.NewRendezvous()
	rdv.UpdateMembers(members)
	var unsent string
	for unsent == "" || rdv.GetByClusterIdentity(cluster.NewClusterIdentity(unsent, "scripted")) != self.Address() {
		unsent = ids.New()
	}
	onGhost(unsent)
	if _, err := r.Route(ctx, "scripted", unsent, ok); err != nil {
		t.Fatalf("a request sent after its member was killed: %v, want it retried and answered", err)
	}
	if s.count(unsent) != 1 || r.Retries() == 0 {
		t.Fatalf("after the kill: %d deliveries, %d retries; want 1 delivery after a retry", s.count(unsent), r.Retries())
	}
}
