package placement

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
)

// DefaultRefresh is how often the automanaged provider polls its peers:
// a dead member leaves the topology within about this long.
const DefaultRefresh = 500 * time.Millisecond

// MemberConfig describes one member of a static-peer cluster.
type MemberConfig struct {
	// Name is the cluster name; members of one cluster share it.
	Name string
	// Host is the address the remote binds and advertises (e.g.
	// 127.0.0.1). Its port is always 0: a fresh port per start, so peers
	// never confuse a restarted member with its predecessor.
	Host string
	// AutoManagedPort is this member's automanaged HTTP port (it listens
	// on all interfaces, without authentication: firewall it).
	AutoManagedPort int
	// Peers are every member's host:automanaged-port, this one included.
	Peers []string
	// Kinds are the kinds this member hosts (Kinds).
	Kinds []*cluster.Kind
	// RequestTimeout is the cluster's request timeout (default
	// DefaultRequestTimeout); Refresh the provider's poll (default
	// DefaultRefresh).
	RequestTimeout, Refresh time.Duration
	// RemoteOptions are added to the remote's configuration (the node's
	// guard, TLS, message size).
	RemoteOptions []remote.ConfigOption
}

// Member is a started cluster member. Shutdown is safe to call more than
// once (the library's is not).
type Member struct {
	Cluster *cluster.Cluster
	once    sync.Once
}

// StartMember joins sys to the cluster described by cfg and binds router
// (nil: none) to it. It returns once the member is started; use
// WaitMembers before serving traffic.
func StartMember(sys *actor.ActorSystem, cfg MemberConfig, router *Router) (m *Member, err error) {
	if cfg.Name == "" || cfg.Host == "" || cfg.AutoManagedPort <= 0 || len(cfg.Peers) == 0 {
		return nil, errs.InvalidArgument("a cluster member needs a name, a host, an automanaged port and its peers")
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	for _, p := range cfg.Peers {
		if _, port, err := net.SplitHostPort(p); err != nil {
			return nil, errs.InvalidArgument("peer %q: %v", p, err)
		} else if _, err := strconv.Atoi(port); err != nil {
			return nil, errs.InvalidArgument("peer %q: bad port", p)
		}
	}
	prov := automanaged.NewWithConfig(cfg.Refresh, cfg.AutoManagedPort, cfg.Peers...)
	rc := remote.Configure(cfg.Host, 0, cfg.RemoteOptions...)
	cc := cluster.Configure(cfg.Name, prov, disthash.New(), rc,
		cluster.WithKinds(cfg.Kinds...), cluster.WithRequestTimeout(cfg.RequestTimeout))
	c := cluster.New(sys, cc)
	defer func() {
		if p := recover(); p != nil { // the remote panics when it cannot listen
			m, err = nil, fmt.Errorf("start cluster member: %v", p)
		}
	}()
	if router != nil {
		// Before the first topology, so the router knows the membership
		// from the start.
		router.topo.watch(sys.EventStream)
	}
	c.StartMember()
	if router != nil {
		router.Bind(c)
	}
	return &Member{Cluster: c}, nil
}

// Address is the member's remote address (host:port).
func (m *Member) Address() string { return m.Cluster.ActorSystem.Address() }

// Members is the number of members in this member's topology.
func (m *Member) Members() int { return m.Cluster.MemberList.Length() }

// WaitMembers waits until the topology holds at least n members or ctx
// ends. The member list changes on provider polls; it is checked every
// poll interval.
func (m *Member) WaitMembers(ctx context.Context, n int) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for m.Members() < n {
		select {
		case <-ctx.Done():
			return errs.Unavailable("cluster has %d of %d members: %v", m.Members(), n, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Shutdown leaves the cluster gracefully (the activations here stop) and
// stops the remote; only the first call does anything.
func (m *Member) Shutdown() {
	m.once.Do(func() { m.Cluster.Shutdown(true) })
}
