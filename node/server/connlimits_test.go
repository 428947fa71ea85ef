package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// startLimited starts a node on an in-memory database with cfg's limits.
func startLimited(t *testing.T, edit func(*Config)) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Data = "memory:" + strings.ReplaceAll(t.Name(), "/", "_")
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", ""
	cfg.ShutdownTimeout = 10 * time.Second
	edit(cfg)
	n, err := Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	return n
}

// TestStreamsPastTheBoundAreRefused opens 20,000 AppendBatches streams on
// one connection and leaves them idle, ignoring the node's
// SETTINGS_MAX_CONCURRENT_STREAMS as a hostile client would (issue 15: they
// cost an unbounded node 273 MB). The node refuses every stream past
// --grpc-max-streams (RST_STREAM REFUSED_STREAM), its goroutines stay
// bounded by the streams it took, and another client is served meanwhile.
func TestStreamsPastTheBoundAreRefused(t *testing.T) {
	const streams, bound = 20000, 64
	n := startLimited(t, func(c *Config) { c.GRPCMaxStreams = bound })
	before := runtime.NumGoroutine()

	raw, err := net.Dial("tcp", n.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fr := http2.NewFramer(raw, raw)
	if _, err := io.WriteString(raw, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// The node's SETTINGS (its stream bound among them) come first; ack
	// them before anything else, so that only this goroutine writes.
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	// Count the node's refusals while the streams are opened.
	refusedC := make(chan int, 1)
	go func() {
		refused := 0
		defer func() { refusedC <- refused }()
		for refused < streams-bound {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if f, ok := f.(*http2.RSTStreamFrame); ok && f.ErrCode == http2.ErrCodeRefusedStream {
				refused++
			}
		}
	}()
	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "node"},
		{":path", "/" + sessionv1.SessionService_ServiceDesc.ServiceName + "/AppendBatches"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	block := hdr.Bytes()
	for i := range streams {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block, EndHeaders: true}); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	select {
	case refused := <-refusedC:
		if refused < streams-bound {
			t.Fatalf("the node refused %d of %d streams opened past its bound of %d", refused, streams-bound, bound)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the node did not refuse the streams past its bound within 2 minutes")
	}
	// Each stream taken is a handler and its receiver (and gRPC's own);
	// 20,000 of them would be 40,000 goroutines.
	if g := runtime.NumGoroutine() - before; g > 4*bound+50 {
		t.Fatalf("%d more goroutines with %d streams open, want at most %d", g, bound, 4*bound+50)
	}

	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := sessionv1.NewSessionServiceClient(conn).Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "honest"}); err != nil {
		t.Fatalf("another client while the streams are held: %v", err)
	}
}

// TestIdleConnectionIsClosed: a connection with no stream is closed after
// --grpc-idle-timeout (issue 15: idle connections were kept forever), and
// its client reconnects on its next call.
func TestIdleConnectionIsClosed(t *testing.T) {
	n := startLimited(t, func(c *Config) { c.GRPCIdleTimeout = 300 * time.Millisecond })
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := sessionv1.NewSessionServiceClient(conn)
	if _, err := api.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "idle"}); err != nil {
		t.Fatal(err)
	}
	// The node's GOAWAY turns the client's channel idle.
	for s := conn.GetState(); s != connectivity.Idle; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			t.Fatalf("the idle connection is still %v after 30 s; the idle timeout is 300 ms", s)
		}
	}
	if _, err := api.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "back"}); err != nil {
		t.Fatalf("a call after the idle close: %v", err)
	}
}

// fitConnections sizes the connection bound to the descriptor limit, and
// refuses a limit or a request that cannot work.
func TestFitConnections(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		requested int
		nofile    uint64
		want      int
		err       string
	}{
		{0, 0, DefaultGRPCMaxConnections, ""},
		{0, 1 << 20, DefaultGRPCMaxConnections, ""},
		{0, 256, 256 - fdReserve, ""},
		{100, 256, 100, ""},
		{200, 256, 0, "does not fit the open-file limit of 256"},
		{0, 100, 0, "raise it to at least"},
		{-1, 1 << 20, 0, "must not be negative"},
	} {
		got, err := fitConnections(c.requested, c.nofile, log)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("fitConnections(%d, %d) = %d, %v; want an error with %q", c.requested, c.nofile, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("fitConnections(%d, %d) = %d, %v; want %d", c.requested, c.nofile, got, err, c.want)
		}
	}
}

// TestConnTrackerReportsEachClosedConnectionOnce: the feed streams learn
// of a closed connection (its transport dropped the events it held) by
// its key, once, however many times it is closed (the node's stall
// handling and gRPC's transport both close it).
func TestConnTrackerReportsEachClosedConnectionOnce(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan string, 2)
	tr := &connTracker{Listener: lis, conns: map[string]net.Conn{}, onClose: func(key string) { closed <- key }}
	defer tr.Close()
	client, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := tr.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close()
	if got := <-closed; got != client.LocalAddr().String() {
		t.Fatalf("closed connection reported as %q, want its client's address %q", got, client.LocalAddr())
	}
	select {
	case got := <-closed:
		t.Fatalf("a second report for %q", got)
	default:
	}
}
