package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/node/appendstream"
	"github.com/agentstate/agentstate/node/client"
	"github.com/agentstate/agentstate/node/codec"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

type markKey struct{}

// fake answers an append with one message whose id is the request's first
// message id and whose sequence counts the appends it served; a session id
// of "fail" is refused, one of "block" waits for release, one of "panic"
// panics.
type fake struct {
	sessionv1.UnimplementedSessionServiceServer
	served   atomic.Int64
	unmarked atomic.Int64
	entered  chan struct{} // a "block" append arrived
	release  chan struct{}
}

func (f *fake) Append(ctx context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	if ctx.Value(markKey{}) == nil {
		f.unmarked.Add(1)
	}
	switch req.GetSessionId() {
	case "fail":
		return nil, errs.ResourceExhausted("backlog full")
	case "panic":
		panic("fake service failure")
	case "block":
		f.entered <- struct{}{}
		<-f.release
	}
	seq := f.served.Add(1) - 1
	return &sessionv1.AppendResponse{Messages: []*sessionv1.AppendedMessage{
		{MessageId: req.GetMessages()[0].GetMessageId(), Sequence: seq},
	}}, nil
}

type harness struct {
	fake     *fake
	streams  atomic.Int64 // streams the server saw opened
	observed atomic.Int64
	client   *client.StreamClient
	batch    *client.BatchClient
	srv      *grpc.Server
	conn     *grpc.ClientConn
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{fake: &fake{entered: make(chan struct{}, 1), release: make(chan struct{})}}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.ForceServerCodecV2(codec.Codec()), grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		h.streams.Add(1)
		return handler(srv, ss)
	}))
	sessionv1.RegisterSessionServiceServer(srv, &appendstream.Server{
		SessionServiceServer: h.fake,
		Mark:                 func(ctx context.Context) context.Context { return context.WithValue(ctx, markKey{}, true) },
		Observe:              func(*sessionv1.AppendResponse, error) { h.observed.Add(1) },
	})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.Codec())))
	if err != nil {
		t.Fatal(err)
	}
	h.client = client.NewStreamClient(sessionv1.NewSessionServiceClient(conn))
	h.batch = client.NewBatchClient(sessionv1.NewSessionServiceClient(conn))
	h.srv, h.conn = srv, conn
	t.Cleanup(func() {
		h.client.Close()
		h.batch.Close()
		conn.Close()
		srv.Stop()
	})
	return h
}

// appendFunc is StreamClient.Append or BatchClient.Append.
type appendFunc func(context.Context, *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error)

// appendConcurrently has callers goroutines append each messages apiece,
// with ids of their own, and fails the test on an error or on an answer
// carrying another request's id.
func appendConcurrently(t *testing.T, appendTo appendFunc, callers, each int) {
	t.Helper()
	var wg sync.WaitGroup
	errc := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("%d-%d", g, i)
				resp, err := appendTo(context.Background(), req("s", id))
				if err != nil {
					errc <- err
					return
				}
				if got := resp.GetMessages()[0].GetMessageId(); got != id {
					errc <- fmt.Errorf("answer for %s to request %s", got, id)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

// held starts a "block" append through appendTo with ctx and returns once
// the server holds it; the channel gets the append's error when it ends.
func (h *harness) held(ctx context.Context, appendTo appendFunc) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := appendTo(ctx, req("block", "held"))
		done <- err
	}()
	<-h.fake.entered
	return done
}

func req(session, id string) *sessionv1.AppendRequest {
	return &sessionv1.AppendRequest{SessionId: session, Messages: []*sessionv1.NewMessage{{MessageId: id, Content: "x"}}}
}

func TestSequentialAppendsShareOneStream(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for i := range 20 {
		id := string(rune('a' + i))
		resp, err := h.client.Append(ctx, req("s", id))
		if err != nil {
			t.Fatal(err)
		}
		if m := resp.GetMessages(); len(m) != 1 || m[0].GetMessageId() != id || m[0].GetSequence() != int64(i) {
			t.Fatalf("append %d answered %v", i, m)
		}
	}
	if n := h.streams.Load(); n != 1 {
		t.Fatalf("%d streams opened for sequential appends, want 1", n)
	}
	if n := h.observed.Load(); n != 20 {
		t.Fatalf("Observe saw %d appends, want 20", n)
	}
	if n := h.fake.unmarked.Load(); n != 0 {
		t.Fatalf("%d appends ran without the Mark context", n)
	}
}

func TestRequestErrorKeepsTheStream(t *testing.T) {
	h := newHarness(t)
	requestErrorKeepsTheStream(t, h, h.client.Append)
}

// requestErrorKeepsTheStream checks, for either client, that a request the
// node refuses fails alone and its stream carries the next append.
func requestErrorKeepsTheStream(t *testing.T, h *harness, appendTo appendFunc) {
	t.Helper()
	ctx := context.Background()
	_, err := appendTo(ctx, req("fail", "a"))
	if !errors.Is(err, errs.ErrResourceExhausted) || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("err = %v (code %v), want RESOURCE_EXHAUSTED", err, status.Code(err))
	}
	if _, err := appendTo(ctx, req("s", "b")); err != nil {
		t.Fatalf("append after a refused one: %v", err)
	}
	if n := h.streams.Load(); n != 1 {
		t.Fatalf("%d streams, want the first one kept after a request error", n)
	}
}

func TestConcurrentAppendsGetTheirOwnAnswers(t *testing.T) {
	h := newHarness(t)
	const callers, each = 16, 50
	appendConcurrently(t, h.client.Append, callers, each)
	if n := h.fake.served.Load(); n != callers*each {
		t.Fatalf("served %d, want %d", n, callers*each)
	}
	if n := h.streams.Load(); n < 1 || n > callers {
		t.Fatalf("%d streams for %d concurrent callers", n, callers)
	}
}

func TestEndedContextDropsTheStream(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := h.held(ctx, h.client.Append) // the server holds it: give up on it
	cancel()
	if err := <-done; !errors.Is(err, errs.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want OUTCOME_UNKNOWN: the append was sent", err)
	}
	close(h.fake.release)
	if _, err := h.client.Append(context.Background(), req("s", "b")); err != nil {
		t.Fatal(err)
	}
	if n := h.streams.Load(); n != 2 {
		t.Fatalf("%d streams; want the cancelled one dropped and a new one opened", n)
	}
}

func TestClosedClientRefuses(t *testing.T) {
	for name, client := range map[string]func(*harness) (appendFunc, func()){
		"Client":      func(h *harness) (appendFunc, func()) { return h.client.Append, h.client.Close },
		"BatchClient": func(h *harness) (appendFunc, func()) { return h.batch.Append, h.batch.Close },
	} {
		h := newHarness(t)
		appendTo, closeClient := client(h)
		if _, err := appendTo(context.Background(), req("s", "a")); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		closeClient()
		if _, err := appendTo(context.Background(), req("s", "b")); !errors.Is(err, errs.ErrUnavailable) {
			t.Fatalf("%s: err = %v, want UNAVAILABLE after Close", name, err)
		}
	}
}
