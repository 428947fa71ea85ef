package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
)

// Defaults of the gRPC server's limits on connections and streams
// (docs/OPERATIONS.md, Limits).
const (
	// DefaultGRPCMaxStreams bounds the concurrent streams of one
	// connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); a stream past
	// it is refused (REFUSED_STREAM), which clients queue and retry. An
	// idle AppendBatches stream costs the node about 14 KB.
	DefaultGRPCMaxStreams = 256
	// DefaultGRPCMaxConnections bounds the gRPC connections open at once
	// (fitted to the descriptor limit, see fitConnections). Past it the
	// node accepts no more until one closes.
	DefaultGRPCMaxConnections = 1024
	// DefaultGRPCIdleTimeout closes (GOAWAY) a connection that has had no
	// stream for this long; clients reconnect on their next call.
	DefaultGRPCIdleTimeout = 5 * time.Minute
	// DefaultGRPCKeepaliveMinTime is the shortest interval at which a
	// client may ping; a client pinging more often is disconnected.
	DefaultGRPCKeepaliveMinTime = 10 * time.Second

	// keepaliveTime and keepaliveTimeout: the node pings a connection
	// that has been silent for keepaliveTime and closes it when no answer
	// comes within keepaliveTimeout, so a peer that vanished does not
	// hold a connection (and its descriptor) forever.
	keepaliveTime    = 2 * time.Minute
	keepaliveTimeout = 20 * time.Second
	// handshakeTimeout bounds a new connection's TLS and HTTP/2
	// handshake: a connection that never sends its preface is closed.
	handshakeTimeout = 10 * time.Second
	// streamWindow is each stream's HTTP/2 receive window, fixed: gRPC's
	// dynamic window grows to 16 MiB per stream, all of which a client can
	// fill on a stream the node is not reading (an AppendBatches stream at
	// its bound). 1 MiB keeps a 3 MiB request to a few round trips.
	// connWindow is the connection's: gRPC acknowledges it on receipt,
	// whether the streams are read or not, so it bounds no memory; it
	// only must not throttle the streams.
	streamWindow = 1 << 20
	connWindow   = 4 << 20

	// fdReserve is the descriptors kept for everything but gRPC
	// connections: the database (SQLite: the writer and the reader pool,
	// three files each; PostgreSQL: its pools), the HTTP listener and its
	// connections (httpMaxConnections), the remote endpoint, the log and
	// the runtime's own.
	fdReserve = 128
	// minGRPCConnections: below this, a node does not start.
	minGRPCConnections = 16
	// httpMaxConnections bounds the HTTP (metrics and probes) connections.
	httpMaxConnections = 32
)

// connLimits are the gRPC server's limits on connections and streams.
type connLimits struct {
	MaxStreams       int
	IdleTimeout      time.Duration
	KeepaliveMinTime time.Duration
}

func (l connLimits) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(uint32(l.MaxStreams)),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: l.IdleTimeout,
			Time:              keepaliveTime,
			Timeout:           keepaliveTimeout,
		}),
		// Clients may ping while no stream is open (a Go client with
		// keepalive does), but not more often than KeepaliveMinTime.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
	}
}

// fitConnections returns how many gRPC connections the node accepts at
// once: requested (0: DefaultGRPCMaxConnections, lowered to fit), within
// the process's descriptor limit (nofile; 0: unknown) less fdReserve. An
// explicit request that does not fit, or a limit that leaves room for
// fewer than minGRPCConnections, is refused: the node would otherwise
// fail its own database reads ("too many open files") once clients
// connect.
func fitConnections(requested int, nofile uint64, log *slog.Logger) (int, error) {
	if requested < 0 {
		return 0, fmt.Errorf("--grpc-max-connections must not be negative")
	}
	if nofile == 0 {
		if requested == 0 {
			return DefaultGRPCMaxConnections, nil
		}
		return requested, nil
	}
	if nofile < fdReserve+minGRPCConnections {
		return 0, fmt.Errorf("the open-file limit is %d descriptors: the node keeps %d for its database and other listeners "+
			"and needs room for at least %d gRPC connections; raise it to at least %d (ulimit -n)",
			nofile, fdReserve, minGRPCConnections, fdReserve+minGRPCConnections)
	}
	room := int(min(nofile-fdReserve, 1<<30))
	switch {
	case requested == 0 && room < DefaultGRPCMaxConnections:
		log.Warn("fewer gRPC connections than the default fit the open-file limit",
			"grpc_max_connections", room, "open_file_limit", nofile, "reserved", fdReserve)
		return room, nil
	case requested == 0:
		return DefaultGRPCMaxConnections, nil
	case requested > room:
		return 0, fmt.Errorf("--grpc-max-connections %d does not fit the open-file limit of %d descriptors, of which the node keeps %d "+
			"for its database and other listeners: lower it to at most %d or raise the limit (ulimit -n)",
			requested, nofile, fdReserve, room)
	}
	return requested, nil
}

// listenLimited listens on addr and accepts at most max connections at
// once; past that, Accept waits until one closes (the kernel's backlog
// holds the newcomers).
func listenLimited(addr string, max int) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return netutil.LimitListener(lis, max), nil
}

// connTracker is the gRPC listener's set of open connections by peer
// address, so that the node can close the connection of a client that
// stopped reading an AppendBatches stream (appendstream.Server.OnStall):
// ending the stream alone leaves its unread outcomes and its trailers
// queued in the transport until the client reads or the connection
// closes, and a client could hold up to --grpc-max-streams such streams
// per connection.
type connTracker struct {
	net.Listener
	// onClose, when set, is called with a connection's key once it
	// closed (the feed streams give back what its transport held).
	onClose func(key string)
	mu      sync.Mutex
	conns   map[string]net.Conn
}

func (t *connTracker) Accept() (net.Conn, error) {
	c, err := t.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: t, key: c.RemoteAddr().String()}
	t.mu.Lock()
	t.conns[tc.key] = tc
	t.mu.Unlock()
	return tc, nil
}

// closePeer closes the connection of the stream whose context is ctx.
func (t *connTracker) closePeer(ctx context.Context) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return
	}
	t.mu.Lock()
	c := t.conns[p.Addr.String()]
	t.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	t    *connTracker
	key  string
	once sync.Once
	// pausedUntil (ns since connEpoch; 0: never paused) is when reading
	// may go on (pause).
	pausedUntil atomic.Int64
}

var connEpoch = time.Now()

// pause stops reading the connection of the stream whose context is ctx
// for d (pacing.go says when): its client's next bytes wait in the
// kernel's buffers and its own, and a client that retries in a loop is
// held to one try per pause. Streams of the connection already read go
// on; only the connection's next frames wait.
func (t *connTracker) pause(ctx context.Context, d time.Duration) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return
	}
	t.mu.Lock()
	c, _ := t.conns[p.Addr.String()].(*trackedConn)
	t.mu.Unlock()
	if c == nil {
		return
	}
	until := int64(time.Since(connEpoch) + d)
	for {
		old := c.pausedUntil.Load()
		if old >= until || c.pausedUntil.CompareAndSwap(old, until) {
			return
		}
	}
}

func (c *trackedConn) Read(b []byte) (int, error) {
	if until := c.pausedUntil.Load(); until != 0 {
		if d := time.Duration(until) - time.Since(connEpoch); d > 0 {
			time.Sleep(d) // pacing the client, not synchronization
		}
	}
	return c.Conn.Read(b)
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.t.mu.Lock()
		if c.t.conns[c.key] == c {
			delete(c.t.conns, c.key)
		}
		c.t.mu.Unlock()
		if c.t.onClose != nil {
			c.t.onClose(c.key)
		}
	})
	return err
}
