package appendstream_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/node/appendstream"
	"github.com/agentstate/agentstate/node/codec"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// gate serves appends, recording the message id of each it served; an
// append to session "block" waits in the service until release closes.
type gate struct {
	sessionv1.UnimplementedSessionServiceServer
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	served  []string
}

func (g *gate) Append(_ context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	id := req.GetMessages()[0].GetMessageId()
	g.mu.Lock()
	g.served = append(g.served, id)
	g.mu.Unlock()
	if req.GetSessionId() == "block" {
		g.entered <- struct{}{}
		<-g.release
	}
	return &sessionv1.AppendResponse{Messages: []*sessionv1.AppendedMessage{{MessageId: id}}}, nil
}

func (g *gate) servedIDs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.served...)
}

// drainHarness is a server whose append streams drain on draining, as the
// node's do at SIGTERM.
type drainHarness struct {
	gate     *gate
	draining chan struct{}
	srv      *grpc.Server
	client   sessionv1.SessionServiceClient
}

func newDrainHarness(t *testing.T) *drainHarness {
	t.Helper()
	h := &drainHarness{gate: &gate{entered: make(chan struct{}, 1), release: make(chan struct{})}, draining: make(chan struct{})}
	lis := bufconn.Listen(1 << 20)
	h.srv = grpc.NewServer(grpc.ForceServerCodecV2(codec.Codec()))
	sessionv1.RegisterSessionServiceServer(h.srv, &appendstream.Server{SessionServiceServer: h.gate, Draining: h.draining})
	go h.srv.Serve(lis) //nolint:errcheck // ends with Stop
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h.client = sessionv1.NewSessionServiceClient(conn)
	t.Cleanup(func() {
		conn.Close()
		h.srv.Stop()
	})
	return h
}

// shutdown drains as the node does — Draining, then GracefulStop — and
// returns a channel closed once GracefulStop returned.
func (h *drainHarness) shutdown() <-chan struct{} {
	close(h.draining)
	stopped := make(chan struct{})
	go func() {
		h.srv.GracefulStop()
		close(stopped)
	}()
	return stopped
}

// waitStopped fails the test unless GracefulStop returns well before a
// node's shutdown timeout (30 s by default): no client closed its stream.
func waitStopped(t *testing.T, stopped <-chan struct{}) {
	t.Helper()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("GracefulStop still waits for the open append stream")
	}
}

func isDraining(err error) bool {
	return errs.CodeOf(err) == errs.UnavailableCode || status.Code(err) == codes.Unavailable
}

// TestAppendStreamEndsWhenTheNodeDrains: a client holds an AppendStream
// open with an append in flight when the node starts shutting down. That
// append is answered with its outcome, an append sent after is not served
// (answered UNAVAILABLE, or left unanswered by a stream that ends
// UNAVAILABLE), and the stream ends without the client closing it, so the
// graceful stop does not wait for its timeout.
func TestAppendStreamEndsWhenTheNodeDrains(t *testing.T) {
	h := newDrainHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := h.client.AppendStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(req("s", "before")); err != nil {
		t.Fatal(err)
	}
	if out, err := stream.Recv(); err != nil || out.GetResponse() == nil {
		t.Fatalf("first append: %v, %v", out, err)
	}
	if err := stream.Send(req("block", "in-flight")); err != nil {
		t.Fatal(err)
	}
	<-h.gate.entered // the server is serving it
	stopped := h.shutdown()
	if err := stream.Send(req("s", "after")); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	close(h.gate.release)

	out, err := stream.Recv()
	if err != nil || out.GetResponse().GetMessages()[0].GetMessageId() != "in-flight" {
		t.Fatalf("the append in flight at shutdown was answered %v, %v; want its response", out, err)
	}
	for {
		out, err := stream.Recv()
		if err != nil {
			if !isDraining(err) {
				t.Fatalf("the stream ended with %v, want UNAVAILABLE", err)
			}
			break
		}
		if e := out.GetError(); e == nil || e.GetCode() != errs.UnavailableCode {
			t.Fatalf("an append sent after the shutdown began was answered %v, want UNAVAILABLE", out)
		}
	}
	waitStopped(t, stopped)
	if got := h.gate.servedIDs(); len(got) != 2 || got[0] != "before" || got[1] != "in-flight" {
		t.Fatalf("served %v; want only the appends taken before the shutdown", got)
	}
}

// TestAppendBatchesEndsWhenTheNodeDrains is the same for AppendBatches:
// the appends a stream took are answered, a batch sent after the shutdown
// began is not served, and the stream ends by itself.
func TestAppendBatchesEndsWhenTheNodeDrains(t *testing.T) {
	h := newDrainHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := h.client.AppendBatches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(reqs ...*sessionv1.AppendRequest) *sessionv1.AppendBatch {
		b := &sessionv1.AppendBatch{}
		for _, r := range reqs {
			b.Appends = append(b.Appends, &sessionv1.TaggedAppend{Tag: uint64(len(b.Appends) + 1), Request: r})
		}
		return b
	}
	if err := stream.Send(batch(req("s", "before"))); err != nil {
		t.Fatal(err)
	}
	if out, err := stream.Recv(); err != nil || len(out.GetOutcomes()) != 1 || out.GetOutcomes()[0].GetOutcome().GetResponse() == nil {
		t.Fatalf("first batch: %v, %v", out, err)
	}
	if err := stream.Send(batch(req("block", "in-flight"))); err != nil {
		t.Fatal(err)
	}
	<-h.gate.entered
	stopped := h.shutdown()
	if err := stream.Send(batch(req("s", "after-1"), req("s", "after-2"))); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	close(h.gate.release)

	answered := false
	for {
		out, err := stream.Recv()
		if err != nil {
			if !isDraining(err) {
				t.Fatalf("the stream ended with %v, want UNAVAILABLE", err)
			}
			break
		}
		for _, oc := range out.GetOutcomes() {
			if r := oc.GetOutcome().GetResponse(); r != nil {
				if r.GetMessages()[0].GetMessageId() != "in-flight" {
					t.Fatalf("served %v after the shutdown began", r)
				}
				answered = true
			} else if e := oc.GetOutcome().GetError(); e.GetCode() != errs.UnavailableCode {
				t.Fatalf("an append sent after the shutdown began was answered %v, want UNAVAILABLE", e)
			}
		}
	}
	if !answered {
		t.Fatal("the append in flight at shutdown was not answered")
	}
	waitStopped(t, stopped)
	if got := h.gate.servedIDs(); len(got) != 2 || got[0] != "before" || got[1] != "in-flight" {
		t.Fatalf("served %v; want only the appends taken before the shutdown", got)
	}
}

func req(session, id string) *sessionv1.AppendRequest {
	return &sessionv1.AppendRequest{SessionId: session, Messages: []*sessionv1.NewMessage{{MessageId: id, Content: "x"}}}
}
