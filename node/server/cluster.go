package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/placement"
	"github.com/asynkron/protoactor-go/actor"
)

// clusterFlags are the validated cluster settings of serve.
type clusterFlags struct {
	peers []string
	host  string
}

func isPostgres(data string) bool {
	return strings.HasPrefix(data, "postgres://") || strings.HasPrefix(data, "postgresql://")
}

// parseCluster validates --cluster, --peers and --am-port; nil without
// --cluster. A cluster needs a store every member shares: PostgreSQL.
func parseCluster(f *Config) (*clusterFlags, error) {
	if f.ClusterName == "" {
		if f.Peers != "" || f.AMPort != 0 {
			return nil, fmt.Errorf("--peers and --am-port need --cluster")
		}
		return nil, nil
	}
	if f.AMPort <= 0 || f.AMPort > 65535 {
		return nil, fmt.Errorf("--cluster needs --am-port, this member's automanaged port")
	}
	if !isPostgres(f.Data) {
		return nil, fmt.Errorf("--cluster needs a store all members share: --data postgres://HOST/DB")
	}
	c := &clusterFlags{host: "127.0.0.1"}
	for _, p := range strings.Split(f.Peers, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(p); err != nil {
			return nil, fmt.Errorf("--peers %q: %w", p, err)
		}
		c.peers = append(c.peers, p)
	}
	if len(c.peers) == 0 {
		return nil, fmt.Errorf("--cluster needs --peers (every member's host:am-port)")
	}
	if f.RemoteAddr != "" {
		host, port, err := net.SplitHostPort(f.RemoteAddr)
		if err != nil {
			return nil, fmt.Errorf("--remote-addr %q: %w", f.RemoteAddr, err)
		}
		if port != "0" {
			return nil, fmt.Errorf("--remote-addr in cluster mode takes port 0: a fresh port per start keeps peers from mistaking a restarted member for its predecessor")
		}
		c.host = host
	}
	return c, nil
}

// startMember joins the cluster with the session and plan kinds of node.
// The member's remote runs behind the same guard as a plain remote
// endpoint, widened to the cluster's own traffic.
func startMember(sys *actor.ActorSystem, node *actors.Node, f *Config, c *clusterFlags, router *placement.Router, m *metrics, log *slog.Logger) (*placement.Member, error) {
	ropts, err := remoteConfig(sys, remoteOptions{
		Advertise: f.RemoteAdvertise,
		Cert:      f.RemoteCert, Key: f.RemoteKey, CA: f.RemoteCA,
		MaxRecvBytes: f.MaxRecvBytes,
		Exposed:      []string{node.Sessions().PID().Id, node.Plans().PID().Id, node.Audit().PID().Id, feedActorName},
	}, true, m, log)
	if err != nil {
		return nil, err
	}
	return placement.StartMember(sys, placement.MemberConfig{
		Name: f.ClusterName, Host: c.host, AutoManagedPort: f.AMPort, Peers: c.peers,
		Kinds:         placement.Kinds(node.Sessions(), node.Plans()),
		RemoteOptions: ropts,
	}, router)
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
