package bench

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/session"
	"github.com/agentstate/agentstate/actors/writer"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/appendstream"
	nodeclient "github.com/agentstate/agentstate/node/client"
	"github.com/agentstate/agentstate/node/codec"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// commitCounter is the audit observer of a measured node: it counts the
// transactions that committed and the time the writer spent in them, for
// Result.MeanBatch and Result.WriterBusy.
type commitCounter struct {
	n    atomic.Int64
	busy atomic.Int64 // nanoseconds
}

func (c *commitCounter) BatchCommitted(_, _ int, dur time.Duration, err error) {
	c.busy.Add(int64(dur))
	if err == nil {
		c.n.Add(1)
	}
}

func (c *commitCounter) AsyncRetried(int, error) {}
func (c *commitCounter) AsyncLost(int, error)    {}

// localNode is an agentstate node in this process, on its own actor system
// and its own database file.
type localNode struct {
	store   persistence.Store
	sys     *actor.ActorSystem
	node    *actors.Node
	commits commitCounter
}

func startNode(path, synchronous string) (*localNode, error) {
	return startNodeIdle(path, synchronous, 0)
}

// startNodeIdle starts a node whose session actors passivate after idle
// (0: the node's default).
func startNodeIdle(path, synchronous string, idle time.Duration) (*localNode, error) {
	return startNodeURL("file:"+path+"?synchronous="+synchronous, idle)
}

// startNodeURL starts a node on the SQLite database url (sqlite.Open).
func startNodeURL(url string, idle time.Duration) (*localNode, error) {
	store, err := sqlite.Open(url)
	if err != nil {
		return nil, err
	}
	return startNodeStore(store, idle)
}

// startNodeStore starts a node on store, which it closes when it stops
// (or fails to start).
func startNodeStore(store persistence.Store, idle time.Duration) (*localNode, error) {
	var err error
	n := &localNode{store: store}
	// protoactor's default logger prints every actor start at INFO.
	n.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	n.node, err = actors.Start(n.sys, store, actors.Config{Writer: writer.Config{Observer: &n.commits},
		Sessions: session.Config{IdleTimeout: idle}})
	if err != nil {
		n.sys.Shutdown()
		return nil, errors.Join(err, store.Close())
	}
	return n, nil
}

func (n *localNode) target() *agentstate {
	return &agentstate{api: n.node.Sessions(), counter: &n.commits}
}

// stop drains the node, then closes the system and the store, each once.
func (n *localNode) stop(ctx context.Context) error {
	err := n.node.Stop(ctx)
	n.sys.Shutdown()
	return errors.Join(err, n.store.Close())
}

// grpcConns is how many client connections a gRPC run spreads its calls
// over (see grpcSessions): one per core the client may use. A connection's
// frames are read by one goroutine and written by another on each side, so
// connections beyond the cores add no parallelism, only more and smaller
// messages, each a write, a read and a wake-up in both processes (on two
// cores, 8 connections cost W1 and W2 25-40% more CPU per append than 1
// or 2: docs/bench/HISTORY.md, issue 17, gRPC).
func grpcConns() int { return min(max(runtime.GOMAXPROCS(0), 1), 8) }

// loopbackServer serves n's sessions service on 127.0.0.1 for a gRPC run.
// Every request, unary or on a stream, is marked writer.NoWait, as a node's
// own gRPC server marks them: a full backlog refuses network senders
// instead of holding them.
func loopbackServer(n *localNode) (*grpc.Server, string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(codec.Codec()), grpc.UnaryInterceptor(func(ctx context.Context, req any,
		_ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(writer.NoWait(ctx), req)
	}))
	sessionv1.RegisterSessionServiceServer(srv, &appendstream.Server{
		SessionServiceServer: n.node.Sessions(), Mark: writer.NoWait})
	go srv.Serve(lis) //nolint:errcheck // returns when stopped
	return srv, lis.Addr().String(), nil
}

// dial opens grpcConns connections to addr with connOptions.
func dial(addr, token string) ([]*grpc.ClientConn, error) {
	var conns []*grpc.ClientConn
	for range grpcConns() {
		c, err := grpc.NewClient(addr, connOptions(token)...)
		if err != nil {
			closeConns(conns)
			return nil, err
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// connOptions are a bench connection's: the node's codec and receive
// windows as a node's clients use them (client.DialOptions) but without
// OutcomeOptions, whose per-call bookkeeping the streaming appends do not
// need.
func connOptions(token string) []grpc.DialOption {
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.Codec()))}, nodeclient.WindowOptions()...)
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(nodeclient.Bearer(token)))
	}
	return opts
}

func closeConns(conns []*grpc.ClientConn) {
	for _, c := range conns {
		c.Close()
	}
}
