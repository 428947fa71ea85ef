package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/appendstream"
	"github.com/agentstate/agentstate/node/client"
	"github.com/agentstate/agentstate/node/codec"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// recordedConn keeps every byte the node read from its client.
type recordedConn struct {
	net.Conn
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (c recordedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.buf.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

type recordingListener struct {
	net.Listener
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return recordedConn{Conn: c, mu: &l.mu, buf: &l.buf}, nil
}

// pings counts the PING frames (not acknowledgements) the client sent.
func (l *recordingListener) pings(t *testing.T) int {
	t.Helper()
	l.mu.Lock()
	data := bytes.TrimPrefix(l.buf.Bytes(), []byte(http2.ClientPreface))
	l.mu.Unlock()
	fr := http2.NewFramer(nil, bytes.NewReader(data))
	n := 0
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return n
		}
		if err != nil {
			t.Fatalf("parse the client's frames: %v", err)
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			n++
		}
	}
}

// appendRoundTrips serves a fake node on a recording listener, dials it
// with opts, and makes 50 appends one after another on a BatchClient;
// it returns the pings the client sent meanwhile.
func appendRoundTrips(t *testing.T, opts ...grpc.DialOption) int {
	t.Helper()
	lis := &recordingListener{Listener: bufconn.Listen(1 << 20)}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(codec.Codec()))
	sessionv1.RegisterSessionServiceServer(srv, &appendstream.Server{
		SessionServiceServer: &fake{entered: make(chan struct{}, 1), release: make(chan struct{})}})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	defer srv.Stop()
	opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return lis.Listener.(*bufconn.Listener).DialContext(ctx)
	}))
	conn, err := grpc.NewClient("passthrough:///bufnet", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	batch := client.NewBatchClient(sessionv1.NewSessionServiceClient(conn))
	defer batch.Close()
	for i := range 50 {
		if _, err := batch.Append(context.Background(), req("s", fmt.Sprint(i))); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	return lis.pings(t)
}

// A connection made with DialOptions has fixed receive windows, so its
// bandwidth estimator sends no ping per message of outcomes. (The second
// half shows the recording sees the pings a dynamic window sends.)
func TestDialOptionsSendNoWindowPings(t *testing.T) {
	if n := appendRoundTrips(t, client.DialOptions(client.Options{})...); n != 0 {
		t.Fatalf("a client with DialOptions sent %d pings over 50 appends, want none", n)
	}
	dynamic := appendRoundTrips(t, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.Codec())))
	if dynamic == 0 {
		t.Fatal("the recording saw no ping from a client with gRPC's dynamic window: it cannot tell")
	}
}
