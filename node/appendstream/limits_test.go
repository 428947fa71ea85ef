package appendstream_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/node/appendstream"
	"github.com/agentstate/agentstate/node/codec"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// echo answers every append at once with a response as large as its
// reply field asks, counting the appends being served and the most served
// at once. An append to session "hold" waits until release closes.
type echo struct {
	sessionv1.UnimplementedSessionServiceServer
	reply   int
	release chan struct{}
	// held receives one value per append that starts waiting on release.
	held    chan struct{}
	serving atomic.Int64
	peak    atomic.Int64
	served  atomic.Int64
}

func (e *echo) Append(_ context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	n := e.serving.Add(1)
	defer e.serving.Add(-1)
	for {
		p := e.peak.Load()
		if n <= p || e.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if req.GetSessionId() == "hold" {
		e.held <- struct{}{}
		<-e.release
	}
	e.served.Add(1)
	id := req.GetMessages()[0].GetMessageId()
	return &sessionv1.AppendResponse{Messages: []*sessionv1.AppendedMessage{{MessageId: id + strings.Repeat("r", e.reply)}}}, nil
}

// limitHarness serves echo over loopback TCP with the given limits and
// records how each AppendBatches stream ended.
type limitHarness struct {
	svc    *echo
	addr   string
	mu     sync.Mutex
	ended  []error // each AppendBatches handler's error (honest streams end nil)
	endedC chan struct{}
	stalls atomic.Int64 // OnStall calls
}

func newLimitHarness(t *testing.T, svc *echo, lim appendstream.Limits) *limitHarness {
	t.Helper()
	h := &limitHarness{svc: svc, endedC: make(chan struct{}, 1024)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = lis.Addr().String()
	// Static flow-control windows, as the node's server has: with gRPC's
	// dynamic window a stream nobody reads buffers up to 16 MiB.
	srv := grpc.NewServer(grpc.ForceServerCodecV2(codec.Codec()),
		grpc.InitialWindowSize(64<<10), grpc.InitialConnWindowSize(64<<10),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			err := handler(srv, ss)
			if err != nil && strings.HasSuffix(info.FullMethod, "/AppendBatches") {
				h.mu.Lock()
				h.ended = append(h.ended, err)
				h.mu.Unlock()
				h.endedC <- struct{}{}
			}
			return err
		}))
	sessionv1.RegisterSessionServiceServer(srv, &appendstream.Server{SessionServiceServer: svc, Limits: lim,
		OnStall: func(context.Context) { h.stalls.Add(1) }})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	return h
}

func (h *limitHarness) dial(t *testing.T) sessionv1.SessionServiceClient {
	t.Helper()
	// A static window, so that a stream the client does not read fills
	// in 64 KiB (gRPC's dynamic window would first take up to 16 MiB of
	// outcomes into the client's memory: the node's is not at stake).
	conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return sessionv1.NewSessionServiceClient(conn)
}

func (h *limitHarness) endings() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.ended...)
}

func batchOf(session string, from, n int) *sessionv1.AppendBatch {
	b := &sessionv1.AppendBatch{}
	for i := range n {
		b.Appends = append(b.Appends, &sessionv1.TaggedAppend{Tag: uint64(from + i), Request: req(session, fmt.Sprint(from+i))})
	}
	return b
}

// roundTrip sends one batch of n appends on a fresh stream and reads all
// their outcomes: what an honest client does.
func roundTrip(ctx context.Context, api sessionv1.SessionServiceClient, n int) error {
	stream, err := api.AppendBatches(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(batchOf("honest", 0, n)); err != nil {
		return err
	}
	got := 0
	for got < n {
		out, err := stream.Recv()
		if err != nil {
			return err
		}
		for _, oc := range out.GetOutcomes() {
			if oc.GetOutcome().GetResponse() == nil {
				return fmt.Errorf("append %d answered %v", oc.GetTag(), oc.GetOutcome().GetError())
			}
			got++
		}
	}
	return stream.CloseSend()
}

// TestAppendBatchesEndsAStreamWhoseClientDoesNotRead: clients send appends
// on AppendBatches streams and never read an outcome (issue 15: 40 such
// streams held 8,192 appends and their goroutines each until a 1 GiB node
// was killed). Each such stream is served up to its budget, then ends with
// RESOURCE_EXHAUSTED once a send stayed blocked for SendTimeout, and the
// node's goroutines come back to where they were; meanwhile and afterwards
// an honest stream on the same connection is served.
func TestAppendBatchesEndsAStreamWhoseClientDoesNotRead(t *testing.T) {
	const hostile, maxAppends = 20, 64
	svc := &echo{reply: 2048}
	h := newLimitHarness(t, svc, appendstream.Limits{MaxAppends: maxAppends, SendTimeout: 5 * time.Second})
	api := h.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := roundTrip(ctx, api, 100); err != nil { // warms the connection
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()

	// Each hostile client sends until the node stops reading it (its Send
	// then blocks on flow control) and never calls Recv.
	attack, stopAttack := context.WithCancel(ctx)
	var senders sync.WaitGroup
	for i := range hostile {
		stream, err := api.AppendBatches(attack)
		if err != nil {
			t.Fatal(err)
		}
		senders.Add(1)
		go func() {
			defer senders.Done()
			for n := 0; ; n += 256 {
				if stream.Send(batchOf(fmt.Sprintf("hostile-%d", i), n, 256)) != nil {
					return
				}
			}
		}()
	}
	for range hostile {
		select {
		case <-h.endedC:
		case <-ctx.Done():
			t.Fatalf("after a minute %d of %d unread streams were ended", len(h.endings()), hostile)
		}
	}
	for _, err := range h.endings() {
		if errs.CodeOf(err) != errs.ResourceExhaustedCode || !strings.Contains(err.Error(), "were not read") {
			t.Fatalf("an unread stream ended with %v, want RESOURCE_EXHAUSTED naming the unread outcomes", err)
		}
	}
	if n := h.stalls.Load(); n != hostile {
		t.Fatalf("OnStall was called %d times for %d unread streams", n, hostile)
	}
	if peak := svc.peak.Load(); peak > hostile*maxAppends+8 {
		t.Fatalf("%d appends were served at once, more than %d streams × %d", peak, hostile, maxAppends)
	}
	// The honest client is served while the unread streams still exist on
	// its connection (the client holds them open).
	if err := roundTrip(ctx, api, 100); err != nil {
		t.Fatalf("an honest stream after the attack: %v", err)
	}
	// The ended streams' workers are gone: what remains is the client's
	// side of its open streams (a few goroutines each), not 64 workers per
	// stream. Goroutines end asynchronously, so wait for the count to come
	// down, bounded by ctx.
	bound := before + hostile*4
	for runtime.NumGoroutine() > bound {
		select {
		case <-ctx.Done():
			t.Fatalf("%d goroutines remain, want at most %d (before the attack: %d)", runtime.NumGoroutine(), bound, before)
		case <-time.After(10 * time.Millisecond): // polling a count, not ordering events
		}
	}
	stopAttack()
	senders.Wait()
}

// TestAppendBatchesBoundsAppendsInFlight: appends that the service holds
// occupy their stream's budget; past MaxAppends the node stops taking the
// stream's appends until some are answered, and then serves the rest.
func TestAppendBatchesBoundsAppendsInFlight(t *testing.T) {
	const maxAppends = 16
	svc := &echo{release: make(chan struct{}), held: make(chan struct{}, 3*maxAppends)}
	h := newLimitHarness(t, svc, appendstream.Limits{MaxAppends: maxAppends})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := h.dial(t).AppendBatches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(batchOf("hold", 0, 3*maxAppends)); err != nil {
		t.Fatal(err)
	}
	for range maxAppends {
		<-svc.held
	}
	close(svc.release)
	answered := 0
	for answered < 3*maxAppends {
		out, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		answered += len(out.GetOutcomes())
	}
	if peak := svc.peak.Load(); peak != maxAppends {
		t.Fatalf("%d appends of one stream were served at once, want the bound %d", peak, maxAppends)
	}
}

// TestAppendBatchesBoundsBytesInFlight: the budget counts the bytes of the
// appends in flight too. With room for 1 MiB, appends of 300 KB are served
// three at a time, and one larger than the whole budget alone.
func TestAppendBatchesBoundsBytesInFlight(t *testing.T) {
	svc := &echo{release: make(chan struct{}), held: make(chan struct{}, 16)}
	h := newLimitHarness(t, svc, appendstream.Limits{MaxBytes: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := h.dial(t).AppendBatches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	big := func(tag uint64, size int) *sessionv1.TaggedAppend {
		return &sessionv1.TaggedAppend{Tag: tag, Request: &sessionv1.AppendRequest{SessionId: "hold",
			Messages: []*sessionv1.NewMessage{{MessageId: fmt.Sprint(tag), Content: strings.Repeat("x", size)}}}}
	}
	b := &sessionv1.AppendBatch{}
	for i := range 6 {
		b.Appends = append(b.Appends, big(uint64(i), 300<<10))
	}
	if err := stream.Send(b); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-svc.held
	}
	close(svc.release)
	if err := stream.Send(&sessionv1.AppendBatch{Appends: []*sessionv1.TaggedAppend{big(6, 1200<<10)}}); err != nil {
		t.Fatal(err)
	}
	answered := 0
	for answered < 7 {
		out, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, oc := range out.GetOutcomes() {
			if oc.GetOutcome().GetResponse() == nil {
				t.Fatalf("append %d: %v", oc.GetTag(), oc.GetOutcome().GetError())
			}
		}
		answered += len(out.GetOutcomes())
	}
	if peak := svc.peak.Load(); peak != 3 {
		t.Fatalf("%d appends of 300 KB were served at once with a budget of 1 MiB, want 3", peak)
	}
}
