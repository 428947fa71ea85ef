package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/labstack/echo"
)

// DefaultRefresh is how often the automanaged provider polls its peers:
// a dead member leaves the topology within about this long.
const DefaultRefresh = 500 * time.Millisecond

// MemberConfig describes one member of a cluster: of a static-peer cluster
// (AutoManagedPort and Peers), or of one whose members find each other in
// etcd (Etcd).
type MemberConfig struct {
	// Name is the cluster name; members of one cluster share it.
	Name string
	// Host is the address the remote binds and advertises (e.g.
	// 127.0.0.1). Its port is always 0: a fresh port per start, so peers
	// never confuse a restarted member with its predecessor.
	Host string
	// AutoManagedPort is this member's automanaged HTTP port. It listens
	// on Host only (the library's own server would listen on every
	// interface); it serves this member's address and kinds, read-only
	// and without authentication.
	AutoManagedPort int
	// Peers are every member's host:automanaged-port, this one included.
	Peers []string
	// Etcd, when set, replaces AutoManagedPort and Peers (EtcdConfig).
	Etcd *EtcdConfig
	// Logger logs the membership's changes (default: the actor system's).
	Logger *slog.Logger
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
	name    string
	peers   []string
	// topo is the membership as published on the event stream: the
	// library's own MemberList.Length reads without its lock.
	topo topologyWatch
	// etcd is the member's own registration (MemberConfig.Etcd; else nil)
	// and stopEtcd ends its check.
	etcd     *etcdHealth
	stopEtcd context.CancelFunc
}

// StartMember joins sys to the cluster described by cfg and binds router
// (nil: none) to it. It returns once the member is started; use
// WaitMembers before serving traffic.
func StartMember(sys *actor.ActorSystem, cfg MemberConfig, router *Router) (m *Member, err error) {
	if cfg.Etcd != nil {
		return startEtcdMember(sys, cfg, router)
	}
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
	// The provider's own HTTP server would print a coloured "http server
	// started" line to stdout and its errors there too; it is given one
	// that logs through the actor system's logger instead. The library
	// takes a caller's server only through NewWithTesting, which then
	// leaves the health route to the caller (healthRoute).
	srv := quietEcho(sys.Logger())
	// The library starts the server on 0.0.0.0; a listener of ours set
	// beforehand is used instead.
	amLis, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.AutoManagedPort)))
	if err != nil {
		return nil, errs.InvalidArgument("automanaged port: %v", err)
	}
	srv.Listener = amLis
	prov := automanaged.NewWithTesting(cfg.Refresh, cfg.AutoManagedPort, srv, cfg.Peers...)
	rc := remote.Configure(cfg.Host, 0, cfg.RemoteOptions...)
	cc := cluster.Configure(cfg.Name, prov, disthash.New(), rc,
		cluster.WithKinds(cfg.Kinds...), cluster.WithRequestTimeout(cfg.RequestTimeout))
	c := cluster.New(sys, cc)
	healthRoute(srv, c, cfg.AutoManagedPort)
	defer func() {
		if p := recover(); p != nil { // the remote panics when it cannot listen
			srv.Close()
			if m != nil {
				sys.EventStream.Unsubscribe(m.topo.sub)
			}
			m, err = nil, fmt.Errorf("start cluster member: %v", p)
		}
	}()
	m = &Member{Cluster: c, name: cfg.Name, peers: cfg.Peers}
	// Before the first topology, so that the member and the router know
	// the membership from the start.
	m.topo.watch(sys.EventStream)
	if router != nil {
		router.topo.watch(sys.EventStream)
		router.grpc.watch(sys.EventStream)
	}
	c.StartMember()
	if router != nil {
		router.Bind(c)
	}
	return m, nil
}

// Address is the member's remote address (host:port).
func (m *Member) Address() string { return m.Cluster.ActorSystem.Address() }

// Members is the number of members in this member's topology.
func (m *Member) Members() int {
	if t := m.topo.load(); t != nil {
		return len(t.members)
	}
	return 0
}

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

// AbsentPeers returns the remote addresses of the configured peers that
// are up (their automanaged port answers for a member of this cluster)
// but not in this member's topology. The library removes a member from
// the topology for good once it is blocked (by gossip saying it left, or
// expired heartbeats), so a member that finds peers absent while they
// answer is split from them: it should not take traffic as if it were the
// whole cluster. A peer that just (re)started is absent until the next
// poll (Refresh): callers look for absence that lasts.
func (m *Member) AbsentPeers(ctx context.Context) []string {
	t := m.topo.load()
	if t == nil {
		return nil // no topology yet: nothing to compare
	}
	client := &http.Client{Timeout: 2 * time.Second}
	var absent []string
	for _, p := range m.peers {
		node, err := peerHealth(ctx, client, p)
		if err != nil || node.ID == m.Cluster.ActorSystem.ID || node.ClusterName != m.name {
			continue // down, this member, or not of this cluster
		}
		if addr := net.JoinHostPort(node.Address, strconv.Itoa(node.Port)); !t.has(addr) {
			absent = append(absent, addr)
		}
	}
	return absent
}

// peerHealth asks the automanaged port at hostPort which member it is.
func peerHealth(ctx context.Context, client *http.Client, hostPort string) (*automanaged.NodeModel, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostPort+"/_health", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", hostPort, resp.Status)
	}
	var node automanaged.NodeModel
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&node); err != nil {
		return nil, err
	}
	return &node, nil
}

// Shutdown leaves the cluster gracefully (the activations here stop) and
// stops the remote; only the first call does anything.
func (m *Member) Shutdown() {
	m.once.Do(func() {
		if m.stopEtcd != nil {
			m.stopEtcd()
		}
		m.Cluster.Shutdown(true)
		if m.etcd != nil {
			m.etcd.client.Close()
		}
	})
}

// quietEcho is the automanaged provider's HTTP server, with nothing
// written to stdout: no banner, no "started on" line, and its error log
// (the http.Server's, and echo's own) through log at WARN.
func quietEcho(log *slog.Logger) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	w := &lineLogger{log: log.With("component", "automanaged-http")}
	e.Logger.SetOutput(w)
	e.StdLogger = stdlog.New(w, "", 0)
	return e
}

// healthRoute serves what the library's own server serves on /_health
// (automanaged.NewWithConfig): this member as a NodeModel, which peers
// poll to build the topology. Address and kinds are read per request:
// the remote binds its port when the member starts.
func healthRoute(e *echo.Echo, c *cluster.Cluster, autoManagedPort int) {
	e.GET("/_health", func(ctx echo.Context) error {
		host, port, err := c.ActorSystem.GetHostPort()
		if err != nil {
			return ctx.NoContent(http.StatusServiceUnavailable)
		}
		return ctx.JSON(http.StatusOK, automanaged.NewNode(c.Config.Name, c.ActorSystem.ID, host, port,
			autoManagedPort, c.GetClusterKinds()))
	})
}

// lineLogger logs each write (one line of a standard logger) at WARN.
type lineLogger struct{ log *slog.Logger }

func (l *lineLogger) Write(p []byte) (int, error) {
	l.log.Warn(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
