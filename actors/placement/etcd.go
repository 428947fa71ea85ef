package placement

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/cluster"
	etcdprovider "github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdConfig makes a member find its peers in etcd (the library's etcd
// provider) instead of a static peer list: each member registers under
// Prefix/<cluster name>/ with a lease it keeps alive, and watches that
// prefix, so members join and leave at runtime.
type EtcdConfig struct {
	// Endpoints are the etcd servers (host:port or URLs).
	Endpoints []string
	// Prefix is the key prefix (default DefaultEtcdPrefix).
	Prefix string
	// TLS, when set, is used to reach etcd; Username and Password, when
	// set, authenticate to it.
	TLS                *tls.Config
	Username, Password string
	// DialTimeout bounds the first connection (default 5 s): a member
	// that cannot reach etcd at start refuses to start.
	DialTimeout time.Duration
}

// DefaultEtcdPrefix is EtcdConfig.Prefix by default.
const DefaultEtcdPrefix = "/agentstate"

// How a member watches its own registration: every etcdCheckEvery it reads
// its key, waiting at most etcdCheckTimeout. The library's lease is 3 s
// (not configurable), so a member cut off from etcd stops activating before
// the others can have dropped it.
const (
	etcdCheckEvery   = 500 * time.Millisecond
	etcdCheckTimeout = time.Second
	// etcdLeaveTimeout bounds the library's deregistration on a graceful
	// leave: it waits for etcd without a deadline, and a member leaving
	// while etcd is down would never exit. Its lease expires on its own.
	etcdLeaveTimeout = 3 * time.Second
)

func (c *EtcdConfig) clientConfig() clientv3.Config {
	d := c.DialTimeout
	if d <= 0 {
		d = 5 * time.Second
	}
	return clientv3.Config{
		Endpoints: c.Endpoints, DialTimeout: d, TLS: c.TLS,
		Username: c.Username, Password: c.Password,
		// The client's own zap log would go to stderr beside the
		// node's; what matters is reported by the membership check.
		Logger: zap.NewNop(),
	}
}

// newEtcdProvider returns the library's etcd provider behind a bounded
// leave, and the client the membership check uses.
func newEtcdProvider(cfg *EtcdConfig) (*etcdLeave, *clientv3.Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, nil, errs.InvalidArgument("etcd membership needs at least one endpoint")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultEtcdPrefix
	}
	cfg.Prefix = "/" + strings.Trim(cfg.Prefix, "/")
	cc := cfg.clientConfig()
	check, err := clientv3.New(cc)
	if err != nil {
		return nil, nil, errs.Unavailable("etcd %s: %v", strings.Join(cfg.Endpoints, ","), err)
	}
	// The client connects lazily; a first read says whether etcd answers
	// (and accepts the credentials) before the member joins.
	ctx, cancel := context.WithTimeout(context.Background(), cc.DialTimeout)
	defer cancel()
	if _, err := check.Get(ctx, cfg.Prefix, clientv3.WithCountOnly()); err != nil {
		check.Close()
		return nil, nil, errs.Unavailable("etcd %s: %v", strings.Join(cfg.Endpoints, ","), err)
	}
	p, err := etcdprovider.NewWithConfig(cfg.Prefix, cc)
	if err != nil {
		check.Close()
		return nil, nil, errs.Unavailable("etcd %s: %v", strings.Join(cfg.Endpoints, ","), err)
	}
	return &etcdLeave{Provider: p}, check, nil
}

// etcdLeave is the library's provider with a leave that ends.
type etcdLeave struct{ *etcdprovider.Provider }

var _ cluster.ClusterProvider = (*etcdLeave)(nil)

func (p *etcdLeave) Shutdown(graceful bool) error {
	done := make(chan error, 1)
	go func() { done <- p.Provider.Shutdown(graceful) }()
	t := time.NewTimer(etcdLeaveTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("etcd did not answer the leave within %v; the registration expires with its lease", etcdLeaveTimeout)
	}
}

// etcdHealth is a member's view of its own registration in etcd.
//
// Invariant: problem is "" only while the latest read of the member's key
// answered and found the registration this member made when it joined
// (same create revision). Once the key is gone, or re-created, the other
// members saw it leave and blocked its id for good (the library never
// re-admits a member that left): the problem then sticks (expired) until
// the member restarts under a new id.
type etcdHealth struct {
	client  *clientv3.Client
	key     string
	created int64 // create revision of the registration; 0 before the first read
	expired bool
	problem atomic.Pointer[string]
	log     *slog.Logger
	// repair, when set, runs after each check that found etcd healthy.
	repair *watchRepair
}

func newEtcdHealth(client *clientv3.Client, prefix, clusterName, memberID string, log *slog.Logger) *etcdHealth {
	h := &etcdHealth{client: client, log: log,
		// The library's key: prefix/cluster/cluster@id (etcd provider's getEtcdKey).
		key: prefix + "/" + clusterName + "/" + clusterName + "@" + memberID}
	why := "joining: registration in etcd not yet confirmed"
	h.problem.Store(&why)
	return h
}

// Problem says why this member should take no new work ("" when none).
func (h *etcdHealth) Problem() string { return *h.problem.Load() }

// run checks the registration until ctx ends, logging each change.
func (h *etcdHealth) run(ctx context.Context) {
	t := time.NewTicker(etcdCheckEvery)
	defer t.Stop()
	for {
		h.check(ctx)
		if h.repair != nil && h.Problem() == "" {
			rctx, cancel := context.WithTimeout(ctx, etcdCheckTimeout)
			h.repair.check(rctx)
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *etcdHealth) check(ctx context.Context) {
	why := h.read(ctx)
	if ctx.Err() != nil {
		return // leaving: the last verdict stands
	}
	prev := h.problem.Swap(&why)
	switch {
	case why != "" && *prev != why:
		h.log.Warn("cluster membership: "+why+"; taking no new activations", "key", h.key)
	case why == "" && *prev != "":
		h.log.Info("cluster membership: registered in etcd; taking activations", "key", h.key)
	}
}

// read reads the registration once and returns the problem it shows.
func (h *etcdHealth) read(ctx context.Context) string {
	if h.expired {
		return h.expiredProblem()
	}
	ctx, cancel := context.WithTimeout(ctx, etcdCheckTimeout)
	defer cancel()
	resp, err := h.client.Get(ctx, h.key)
	switch {
	case err != nil:
		return fmt.Sprintf("etcd unreachable: %v", err)
	case len(resp.Kvs) == 0 && h.created == 0:
		return "joining: registration in etcd not yet confirmed"
	case len(resp.Kvs) == 0 || (h.created != 0 && resp.Kvs[0].CreateRevision != h.created):
		h.expired = true
		return h.expiredProblem()
	}
	h.created = resp.Kvs[0].CreateRevision
	return ""
}

func (h *etcdHealth) expiredProblem() string {
	return "registration in etcd expired (cut off longer than its lease): the other members dropped this one; restart it to rejoin"
}
