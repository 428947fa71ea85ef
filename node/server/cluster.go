package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/placement"
	"github.com/asynkron/protoactor-go/actor"
)

// startMember joins the cluster with the session and plan kinds of node.
// The member's remote runs behind the same guard as a plain remote
// endpoint, widened to the cluster's own traffic.
func startMember(sys *actor.ActorSystem, node *actors.Node, f *Config, c *clusterFlags, router *placement.Router, ids *identities, m *metrics, log *slog.Logger) (*placement.Member, *remoteGuard, error) {
	ropts, guard, err := guardedRemoteConfig(sys, remoteOptions{
		Advertise: f.RemoteAdvertise,
		Cert:      f.RemoteCert, Key: f.RemoteKey, CA: f.RemoteCA,
		MaxRecvBytes: f.MaxRecvBytes,
		Exposed:      []string{node.Sessions().PID().Id, node.Plans().PID().Id, node.Audit().PID().Id, feedActorName},
		Identities:   ids,
	}, true, m, log)
	if err != nil {
		return nil, nil, err
	}
	member, err := placement.StartMember(sys, placement.MemberConfig{
		Name: f.ClusterName, Host: c.host, AutoManagedPort: c.amPort, Peers: c.peers, Etcd: c.etcd,
		Kinds:         placement.Kinds(node.Sessions(), node.Plans()),
		RemoteOptions: ropts,
		Logger:        log,
	}, router)
	return member, guard, err
}

// How watchSplit looks for a split: every splitCheckEvery, and a split is
// reported once it lasted splitChecks checks in a row (a restarted peer is
// absent until the next poll of the provider, half a second).
const (
	splitCheckEvery = time.Second
	splitChecks     = 3
)

// watchSplit keeps ready.split up to date until ctx ends: set while peers
// that answer on their automanaged port are missing from this member's
// topology. The library never re-admits a member it blocked (a gossip
// message saying it left is enough), so such a member is cut off until
// one side restarts; reporting not ready takes it out of rotation, and the
// WARN line says why.
func watchSplit(ctx context.Context, member *placement.Member, ready *readiness, log *slog.Logger) {
	t := time.NewTicker(splitCheckEvery)
	defer t.Stop()
	streak := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		absent := member.AbsentPeers(ctx)
		if len(absent) == 0 {
			if streak >= splitChecks {
				log.Info("cluster: every peer that is up is a member again")
			}
			streak = 0
			ready.split.Store(nil)
			continue
		}
		if streak++; streak == splitChecks {
			why := fmt.Sprintf("cluster split: %d peer(s) are up but not members of this node's cluster (%s); restart this node to rejoin",
				len(absent), strings.Join(absent, ", "))
			log.Warn(why, "members", member.Members())
			ready.split.Store(&why)
		}
	}
}

// becomeReady marks the member ready: with etcd at once (ready.membership
// then follows its registration; members come and go, so there is no count
// to wait for); with static peers once every peer is in the topology (or
// after --cluster-wait: before that, placement may still move), watching
// for splits from then on.
func (s *server) becomeReady(f *Config, cl *clusterFlags, log *slog.Logger) {
	if cl.etcd != nil {
		s.ready.started.Store(true)
		return
	}
	go func() {
		wctx, cancel := context.WithTimeout(context.Background(), f.ClusterWait)
		defer cancel()
		if err := s.member.WaitMembers(wctx, len(cl.peers)); err != nil {
			log.Warn("cluster: serving before every peer joined", "err", err)
		}
		s.ready.started.Store(true)
	}()
	var wctx context.Context
	wctx, s.stopWatch = context.WithCancel(context.Background())
	go watchSplit(wctx, s.member, s.ready, log.With("component", "cluster"))
}

// logAttrs are the serving line's cluster attributes.
func (c *clusterFlags) logAttrs(f *Config, member *placement.Member) []any {
	attrs := []any{"cluster", f.ClusterName, "remote_addr", member.Address()}
	if c.etcd != nil {
		return append(attrs, "membership", MembershipEtcd, "etcd", strings.Join(c.etcd.Endpoints, ","))
	}
	return append(attrs, "membership", MembershipAutomanaged, "am_port", f.AMPort)
}
