package server

import (
	"context"
	"strings"
	"sync"
	"time"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// DefaultFeedPollPostgres is how often a node on PostgreSQL reads the
// store for commits it was not told about (other members', other nodes'):
// the feeds' added latency for those, against one indexed read per tick
// and tailed session.
const DefaultFeedPollPostgres = 100 * time.Millisecond

// feedPollInterval resolves --feed-poll-interval: 0 picks the default
// (polling on PostgreSQL, whose database other nodes may write; none on
// SQLite, whose only writer is this node), negative turns polling off.
func feedPollInterval(f *Config) time.Duration {
	switch {
	case f.FeedPollInterval < 0:
		return 0
	case f.FeedPollInterval > 0:
		return f.FeedPollInterval
	case isPostgres(f.Data):
		return DefaultFeedPollPostgres
	}
	return 0
}

// feedMethods is the prefix of the feed RPCs' full method names.
var feedMethods = "/" + feedv1.FeedService_ServiceDesc.ServiceName + "/"

// rpcGate counts the gRPC calls in flight other than the feeds', so that
// shutdown can drain the writer once every call that may write finished,
// while the feeds' streams are still open: they end only after the hub's
// final read, which follows the writer's drain (and so delivers the last
// committed change). Without it the graceful stop would wait for the
// feeds and the feeds for the writer.
type rpcGate struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0 after wait began
}

func (g *rpcGate) enter(method string) bool {
	if strings.HasPrefix(method, feedMethods) {
		return false
	}
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
	return true
}

func (g *rpcGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

func (g *rpcGate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if g.enter(info.FullMethod) {
		defer g.leave()
	}
	return handler(ctx, req)
}

func (g *rpcGate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if g.enter(info.FullMethod) {
		defer g.leave()
	}
	return handler(srv, ss)
}

// wait returns once no call but the feeds' is in flight, or done is
// closed (the graceful stop ended: nothing is in flight), or timeout.
func (g *rpcGate) wait(done <-chan struct{}, timeout time.Duration) {
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return
	}
	idle := make(chan struct{})
	g.idle = idle
	g.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-idle:
	case <-done:
	case <-t.C:
	}
}

// feedGauge registers the open tails (gRPC streams, actor subscriptions).
func (m *metrics) feedGauge(tails func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentstate_feed_tails", Help: "Open session and change feed tails.",
	}, func() float64 { return float64(tails()) }))
}

// feedBytesGauge registers what the gRPC feed streams hold (their budget,
// --feed-bytes).
func (m *metrics) feedBytesGauge(held func() int64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentstate_feed_held_bytes", Help: "Bytes of feed events the gRPC tails hold: read and not yet sent, or sent and not yet let out by the transport (bounded by --feed-bytes).",
	}, func() float64 { return float64(held()) }))
}

// feedActorName is the feed actor's name, which remote peers address.
const feedActorName = "feed"
