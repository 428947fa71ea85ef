package feedstream_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/feed"
	"github.com/agentstate/agentstate/actors/writer"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/codec"
	"github.com/agentstate/agentstate/node/feedstream"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// harness is a node's actors and hub on a file database, and a gRPC
// server of the feeds over loopback whose listener, like the node's,
// closes the connection of a stalled stream and reports each closed
// connection to the feed server.
type harness struct {
	t     testing.TB
	ctx   context.Context
	node  *actors.Node
	hub   *feed.Hub
	feeds *feedstream.Server
	addr  string

	mu    sync.Mutex
	conns map[string]net.Conn
	// stalls receives the peer address of each stalled stream; closed
	// each connection the server side saw close.
	stalls chan string
	closed chan string
}

func newHarness(t testing.TB, l feedstream.Limits) *harness {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "feeds.db"))
	if err != nil {
		t.Fatal(err)
	}
	hub := feed.New(store.Reader(), feed.Config{Logger: quiet})
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	node, err := actors.Start(sys, store, actors.Config{Writer: writer.Config{Logger: quiet, OnCommit: hub.OnCommit}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	h := &harness{t: t, ctx: ctx, node: node, hub: hub, conns: map[string]net.Conn{},
		stalls: make(chan string, 64), closed: make(chan string, 1024)}
	h.feeds = &feedstream.Server{Hub: hub, Limits: l, OnStall: h.stalled}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = lis.Addr().String()
	srv := grpc.NewServer(grpc.ForceServerCodecV2(codec.Codec()))
	feedv1.RegisterFeedServiceServer(srv, h.feeds)
	go srv.Serve(&listener{Listener: lis, h: h})
	t.Cleanup(func() {
		srv.Stop()
		if err := node.Stop(context.Background()); err != nil {
			t.Errorf("node stop: %v", err)
		}
		stop, done := context.WithTimeout(context.Background(), time.Second)
		hub.Close(stop)
		done()
		sys.Shutdown()
		store.Close()
		cancel()
	})
	return h
}

func (h *harness) stalled(ctx context.Context) {
	p, _ := peer.FromContext(ctx)
	h.stalls <- p.Addr.String()
	h.mu.Lock()
	c := h.conns[p.Addr.String()]
	h.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

type listener struct {
	net.Listener
	h *harness
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &conn{Conn: c, h: l.h, key: c.RemoteAddr().String()}
	l.h.mu.Lock()
	l.h.conns[tc.key] = tc
	l.h.mu.Unlock()
	return tc, nil
}

type conn struct {
	net.Conn
	h    *harness
	key  string
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.h.feeds.ConnClosed(c.key)
		c.h.closed <- c.key
	})
	return err
}

// dial connects a client; small makes its receive windows the smallest
// gRPC allows (64 KiB), so that a stream it does not read blocks the
// node's sends at once.
func (h *harness) dial(small bool) *grpc.ClientConn {
	h.t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if small {
		opts = append(opts, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	}
	cc, err := grpc.NewClient(h.addr, opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cc.Close() })
	return cc
}

// session creates a session holding n messages of size bytes each.
func (h *harness) session(n, size int) string {
	h.t.Helper()
	r, err := h.node.Sessions().Create(h.ctx, &sessionv1.CreateSessionRequest{ActorName: "feeds"})
	if err != nil {
		h.t.Fatal(err)
	}
	id := r.GetSession().GetSessionId()
	h.append(id, n, size)
	return id
}

func (h *harness) append(id string, n, size int) {
	h.t.Helper()
	body := strings.Repeat("x", size)
	for range n {
		if _, err := h.node.Sessions().Append(h.ctx, &sessionv1.AppendRequest{SessionId: id,
			Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: body}}}); err != nil {
			h.t.Fatal(err)
		}
	}
}

// stall opens n tails of session id from sequence 0 on cc and never
// reads them; it returns once the node subscribed each (its headers).
func (h *harness) stall(cc *grpc.ClientConn, id string, n int) {
	h.t.Helper()
	api := feedv1.NewFeedServiceClient(cc)
	for range n {
		st, err := api.TailSession(h.ctx, &feedv1.TailSessionRequest{SessionId: id})
		if err == nil {
			_, err = st.Header()
		}
		if err != nil {
			h.t.Fatal(err)
		}
	}
}

// read reads a tail of session id from sequence from on cc until it
// delivered n messages, and returns their sequences.
func (h *harness) read(cc *grpc.ClientConn, id string, from int64, n int) []int64 {
	h.t.Helper()
	st, err := feedv1.NewFeedServiceClient(cc).TailSession(h.ctx, &feedv1.TailSessionRequest{SessionId: id, FromSequence: from})
	if err != nil {
		h.t.Fatal(err)
	}
	var seqs []int64
	for len(seqs) < n {
		ev, err := st.Recv()
		if err != nil {
			h.t.Fatalf("after %d messages: %v", len(seqs), err)
		}
		if m := ev.GetMessage(); m != nil {
			seqs = append(seqs, m.GetSequence())
		}
	}
	return seqs
}

// until waits for cond, checking it every few milliseconds, or fails
// with what when the harness's time runs out.
func (h *harness) until(what string, cond func() bool) {
	h.t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-h.ctx.Done():
			h.t.Fatalf("gave up waiting: %s", what)
		}
	}
}
