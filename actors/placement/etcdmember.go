package placement

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
)

// startEtcdMember is StartMember with cfg.Etcd: the library's etcd
// provider, this member's registration checked (Membership), and its kinds
// behind an activationGate that refuses new activations while the
// registration is in doubt.
func startEtcdMember(sys *actor.ActorSystem, cfg MemberConfig, router *Router) (m *Member, err error) {
	switch {
	case cfg.Name == "" || cfg.Host == "":
		return nil, errs.InvalidArgument("a cluster member needs a name and a host")
	case strings.Contains(cfg.Name, "/"):
		// The provider takes a key's last "/" segment as the member's id.
		return nil, errs.InvalidArgument("cluster name %q: etcd membership takes a name without '/'", cfg.Name)
	case cfg.AutoManagedPort != 0 || len(cfg.Peers) > 0:
		return nil, errs.InvalidArgument("etcd membership takes no automanaged port or peers: members find each other in etcd")
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = sys.Logger()
	}
	prov, client, err := newEtcdProvider(cfg.Etcd)
	if err != nil {
		return nil, err
	}
	m = &Member{name: cfg.Name, etcd: newEtcdHealth(client, cfg.Etcd.Prefix, cfg.Name, sys.ID, log)}
	gate := &activationGate{closed: m.etcd.Problem}
	for _, k := range cfg.Kinds {
		k.Props.Configure(actor.WithReceiverMiddleware(gate.middleware))
	}
	rc := remote.Configure(cfg.Host, 0, cfg.RemoteOptions...)
	cc := cluster.Configure(cfg.Name, prov, disthash.New(), rc,
		cluster.WithKinds(cfg.Kinds...), cluster.WithRequestTimeout(cfg.RequestTimeout))
	m.Cluster = cluster.New(sys, cc)
	defer func() {
		// The remote panics when it cannot listen, the cluster when the
		// provider cannot register.
		if p := recover(); p != nil {
			client.Close()
			sys.EventStream.Unsubscribe(m.topo.sub)
			m, err = nil, errs.Unavailable("start cluster member: %v", p)
		}
	}()
	m.topo.watch(sys.EventStream)
	if router != nil {
		router.topo.watch(sys.EventStream)
		router.grpc.watch(sys.EventStream)
	}
	if router != nil {
		router.membership = m.Membership
	}
	m.Cluster.StartMember()
	if router != nil {
		router.Bind(m.Cluster)
	}
	m.etcd.repair = &watchRepair{client: client, prefix: cfg.Etcd.Prefix + "/" + cfg.Name + "/", selfKey: m.etcd.key,
		has: func(addr string) bool { return m.topo.load().has(addr) }, log: log, missing: map[string]*missingMember{}}
	ctx, cancel := context.WithCancel(context.Background())
	reaper := newPeerReaper(client, cfg.Etcd.Prefix+"/"+cfg.Name+"/", func() bool { return m.etcd.Problem() == "" },
		func(addr string) bool { t := m.topo.load(); return t != nil && t.has(addr) && addr != m.Address() },
		m.peerAddrs, log)
	sub := sys.EventStream.Subscribe(func(ev any) { reaper.event(ctx, ev) })
	go reaper.run(ctx)
	m.stopEtcd = func() {
		cancel()
		sys.EventStream.Unsubscribe(sub)
		reaper.wait()
	}
	m.etcd.check(ctx) // registered by StartMember: ready at once
	go m.etcd.run(ctx)
	return m, nil
}

// peerAddrs returns the remote addresses of the other members of the
// topology.
func (m *Member) peerAddrs() []string {
	t := m.topo.load()
	if t == nil {
		return nil
	}
	self := m.Address()
	out := make([]string, 0, len(t.members))
	for addr := range t.members {
		if addr != self {
			out = append(out, addr)
		}
	}
	return out
}

// Membership says why this member should take no new work, "" when it
// may: with etcd membership, while etcd does not answer its check or no
// longer holds its registration (activations are refused then); always ""
// with a static peer list (see AbsentPeers for its splits).
func (m *Member) Membership() string {
	if m.etcd == nil {
		return ""
	}
	if why := m.etcd.Problem(); why != "" {
		return fmt.Sprintf("cluster membership (etcd): %s", why)
	}
	return ""
}
