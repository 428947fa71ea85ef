package placement_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
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
	"google.golang.org/protobuf/proto"
)

// ghost is a cluster member that never answers: a TCP listener that
// accepts a connection and closes it. accepted receives one value per
// connection a member's remote opens to it, that is, once something was
// sent to it.
type ghost struct {
	member   *cluster.Member
	accepted chan struct{}
}

func newGhost(t *testing.T, name string) *ghost {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &ghost{accepted: make(chan struct{}, 16)}
	port := ln.Addr().(*net.TCPAddr).Port
	g.member = &cluster.Member{Host: "127.0.0.1", Port: int32(port), Id: name, Kinds: []string{"scripted"}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case g.accepted <- struct{}{}:
			default: // a reconnect nobody waits for
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return g
}

// publish announces a topology on m's event stream as the member list
// does. Only subscribers see it (the router, the lookup's rendezvous, the
// PID cache); the member list itself keeps the real single member.
func publish(m *oneMember, members []*cluster.Member, joined, left *cluster.Member) {
	t := &cluster.ClusterTopology{Members: members}
	if joined != nil {
		t.Joined = []*cluster.Member{joined}
	}
	if left != nil {
		t.Left = []*cluster.Member{left}
	}
	m.sys.EventStream.Publish(t)
}

func waitAccepted(t *testing.T, g *ghost) {
	t.Helper()
	select {
	case <-g.accepted:
	case <-time.After(20 * time.Second):
		t.Fatal("nothing was sent to the ghost member")
	}
}

// An attempt waits on a member only while it is in the topology: a request
// in flight to a member that leaves fails OUTCOME_UNKNOWN at once (not at
// the attempt timeout), a cached PID of a departed member is not used, and
// an owner lookup on a member that leaves is abandoned and retried on the
// new membership.
func TestRouterStopsWaitingForADepartedMember(t *testing.T) {
	a, b := newGhost(t, "ghost-a"), newGhost(t, "ghost-b")
	s := &scripted{received: map[string]int{}}
	// One connection attempt per ghost (the library sleeps 2 s after each
	// failed one, and shutting down waits for that).
	m := startMember(t, []*cluster.Kind{s.kind()}, func(c *remote.Config) { c.MaxRetryCount = 1 })
	host, port, err := net.SplitHostPort(m.sys.Address())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	self := &cluster.Member{Host: host, Port: int32(p), Id: m.sys.ID,
		Kinds: []string{session.ClusterKind, plan.ClusterKind, "scripted"}}
	// The attempt timeout is far beyond the test's waits: an answer before
	// it comes from the departure, not from the timeout.
	r := placement.NewRouter(placement.RouterConfig{AttemptTimeout: time.Minute})
	r.Bind(m.cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	route := func(id string, msg proto.Message) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := r.Route(ctx, "scripted", id, msg)
			done <- err
		}()
		return done
	}

	// 1. In flight when its member leaves.
	publish(m, []*cluster.Member{self, a.member}, a.member, nil)
	inFlight := ids.New()
	ghostPID := actor.NewPID(a.member.Address(), "partition-activator/"+inFlight)
	m.cluster.PidCache.Set(inFlight, "scripted", ghostPID)
	done := route(inFlight, &commonv1.Error{Message: "ok"})
	waitAccepted(t, a) // the request is on its way to the ghost
	publish(m, []*cluster.Member{self}, nil, a.member)
	err = <-done
	if !errors.Is(err, errs.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "left the cluster") {
		t.Fatalf("request in flight to a departed member: %v, want OUTCOME_UNKNOWN (left the cluster)", err)
	}
	if s.count(inFlight) != 0 || r.Retries() != 0 {
		t.Fatalf("a request that may have been applied was retried (%d retries, %d deliveries)", r.Retries(), s.count(inFlight))
	}

	// 2. A cached PID of the departed member: not sent, retried at once.
	stale := ids.New()
	m.cluster.PidCache.Set(stale, "scripted", ghostPID)
	if err := <-route(stale, &commonv1.Error{Message: "ok"}); err != nil {
		t.Fatalf("a cached PID of a departed member: %v", err)
	}
	if s.count(stale) != 1 || r.Retries() != 1 {
		t.Fatalf("stale PID: %d deliveries after %d retries; want 1 after 1", s.count(stale), r.Retries())
	}

	// 3. The owner lookup waits on a member that leaves.
	members := []*cluster.Member{self, b.member}
	publish(m, members, b.member, nil)
	rdv := cluster.NewRendezvous()
	rdv.UpdateMembers(members)
	var lookup string
	for lookup == "" || rdv.GetByClusterIdentity(cluster.NewClusterIdentity(lookup, "scripted")) != b.member.Address() {
		lookup = ids.New()
	}
	done = route(lookup, &commonv1.Error{Message: "ok"})
	waitAccepted(t, b) // the activation request is on its way to the ghost
	before := r.Retries()
	publish(m, []*cluster.Member{self}, nil, b.member)
	if err := <-done; err != nil {
		t.Fatalf("lookup on a departed member: %v", err)
	}
	if s.count(lookup) != 1 || r.Retries() == before {
		t.Fatalf("lookup on a departed member: %d deliveries, %d retries; want 1 delivery after a retry", s.count(lookup), r.Retries()-before)
	}
}
