package appendstream_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/node/appendstream"
	"github.com/agentstate/agentstate/node/codec"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// deciding is a service with AppendAsync, as session.Service has: it
// refuses an append to session "bad" at once (as the façade refuses an
// invalid request), panics on session "panic", and keeps the others'
// callbacks until decide answers them all in a row, as the session actors
// answer the appends of one commit.
type deciding struct {
	sessionv1.UnimplementedSessionServiceServer
	mu      sync.Mutex
	waiting []func(*sessionv1.AppendResponse, error)
	ids     []string
	arrived chan struct{} // one value per append kept
}

func (d *deciding) AppendAsync(_ context.Context, req *sessionv1.AppendRequest, done func(*sessionv1.AppendResponse, error)) {
	switch req.GetSessionId() {
	case "bad":
		done(nil, errs.InvalidArgument("bad session"))
		return
	case "panic":
		panic("the service broke")
	}
	d.mu.Lock()
	d.waiting = append(d.waiting, done)
	d.ids = append(d.ids, req.GetMessages()[0].GetMessageId())
	d.mu.Unlock()
	d.arrived <- struct{}{}
}

// decide answers every append kept so far, each with its message id.
func (d *deciding) decide() {
	d.mu.Lock()
	waiting, ids := d.waiting, d.ids
	d.waiting, d.ids = nil, nil
	d.mu.Unlock()
	for i, done := range waiting {
		done(&sessionv1.AppendResponse{Messages: []*sessionv1.AppendedMessage{{MessageId: ids[i], Sequence: int64(i)}}}, nil)
	}
}

// asyncHarness serves d over an in-memory connection and reports each
// AppendBatches handler's return.
func asyncHarness(t *testing.T, d *deciding) (sessionv1.SessionServiceClient, <-chan error) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	ended := make(chan error, 16)
	srv := grpc.NewServer(grpc.ForceServerCodecV2(codec.Codec()),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			err := handler(srv, ss)
			if strings.HasSuffix(info.FullMethod, "/AppendBatches") {
				ended <- err
			}
			return err
		}))
	sessionv1.RegisterSessionServiceServer(srv, &appendstream.Server{SessionServiceServer: d})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return sessionv1.NewSessionServiceClient(conn), ended
}

func asyncReq(session, id string) *sessionv1.AppendRequest {
	return &sessionv1.AppendRequest{SessionId: session, Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, MessageId: id, Content: "c"}}}
}

// A refused append and a panicking one answer only their own tags, with
// their errors; the others of the batch are served and answered under
// theirs, and the stream goes on.
func TestAsyncFailedAppendAnswersOnlyItsTag(t *testing.T) {
	d := &deciding{arrived: make(chan struct{}, 64)}
	api, ended := asyncHarness(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := api.AppendBatches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	batch := &sessionv1.AppendBatch{Appends: []*sessionv1.TaggedAppend{
		{Tag: 10, Request: asyncReq("s", "a")},
		{Tag: 11, Request: asyncReq("bad", "b")},
		{Tag: 12, Request: asyncReq("s", "c")},
		{Tag: 13, Request: asyncReq("panic", "d")},
		{Tag: 14, Request: nil},
	}}
	if err := s.Send(batch); err != nil {
		t.Fatal(err)
	}
	<-d.arrived
	<-d.arrived
	d.decide()
	got := map[uint64]*sessionv1.AppendStreamResponse{}
	for len(got) < 5 {
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("recv after %d outcomes: %v", len(got), err)
		}
		for _, o := range m.GetOutcomes() {
			if got[o.GetTag()] != nil {
				t.Fatalf("tag %d answered twice", o.GetTag())
			}
			got[o.GetTag()] = o.GetOutcome()
		}
	}
	for tag, id := range map[uint64]string{10: "a", 12: "c"} {
		if m := got[tag].GetResponse().GetMessages(); len(m) != 1 || m[0].GetMessageId() != id {
			t.Fatalf("tag %d: %v, want the response for message %s", tag, got[tag], id)
		}
	}
	for tag, want := range map[uint64]errs.Code{11: errs.InvalidArgumentCode, 13: errs.InternalCode, 14: errs.InvalidArgumentCode} {
		if code := got[tag].GetError().GetCode(); code != want {
			t.Fatalf("tag %d: %v, want error %v", tag, got[tag], want)
		}
	}
	// The stream still serves.
	if err := s.Send(&sessionv1.AppendBatch{Appends: []*sessionv1.TaggedAppend{{Tag: 15, Request: asyncReq("s", "e")}}}); err != nil {
		t.Fatal(err)
	}
	<-d.arrived
	d.decide()
	m, err := s.Recv()
	if err != nil || len(m.GetOutcomes()) != 1 || m.GetOutcomes()[0].GetTag() != 15 {
		t.Fatalf("after the failures: %v, %v; want tag 15's outcome", m, err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; err != nil {
		t.Fatalf("handler returned %v after the client closed its side, want nil", err)
	}
}

// A stream that ends while its appends are undecided does not wait for
// them: the handler returns, and their late outcomes are dropped.
func TestAsyncStreamEndsWithAppendsUndecided(t *testing.T) {
	d := &deciding{arrived: make(chan struct{}, 64)}
	api, ended := asyncHarness(t, d)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := api.AppendBatches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&sessionv1.AppendBatch{Appends: []*sessionv1.TaggedAppend{
		{Tag: 1, Request: asyncReq("s", "a")}, {Tag: 2, Request: asyncReq("s", "b")},
	}}); err != nil {
		t.Fatal(err)
	}
	<-d.arrived
	<-d.arrived
	cancel()
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("handler returned nil for a cancelled stream")
		}
	case <-time.After(time.Minute):
		t.Fatal("the handler waited for undecided appends of an ended stream")
	}
	d.decide() // late: dropped, without a send on the ended stream
	if m, err := s.Recv(); err == nil {
		t.Fatalf("recv on the cancelled stream: %v, want its error", m)
	}
}

// holding decides its appends on goroutines of their own, as session
// actors decide them later than AppendAsync returns; an append to session
// "hold" waits until release closes. It counts the most undecided at once,
// and answers with a reply-sized message id.
type holding struct {
	sessionv1.UnimplementedSessionServiceServer
	reply   int
	release chan struct{}
	held    chan struct{}
	mu      sync.Mutex
	now     int
	peak    int
}

func (h *holding) AppendAsync(_ context.Context, req *sessionv1.AppendRequest, done func(*sessionv1.AppendResponse, error)) {
	h.mu.Lock()
	h.now++
	h.peak = max(h.peak, h.now)
	h.mu.Unlock()
	go func() {
		if req.GetSessionId() == "hold" {
			h.held <- struct{}{}
			<-h.release
		}
		h.mu.Lock()
		h.now--
		h.mu.Unlock()
		id := req.GetMessages()[0].GetMessageId() + strings.Repeat("r", h.reply)
		done(&sessionv1.AppendResponse{Messages: []*sessionv1.AppendedMessage{{MessageId: id}}}, nil)
	}()
}

func (h *holding) peakUndecided() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak
}

// limitedAsync serves svc with lim over loopback TCP with the node's fixed
// windows and reports each AppendBatches handler's return.
func limitedAsync(t *testing.T, svc *holding, lim appendstream.Limits) (sessionv1.SessionServiceClient, <-chan error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 16)
	srv := grpc.NewServer(grpc.ForceServerCodecV2(codec.Codec()),
		grpc.InitialWindowSize(64<<10), grpc.InitialConnWindowSize(64<<10),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			err := handler(srv, ss)
			if strings.HasSuffix(info.FullMethod, "/AppendBatches") {
				ended <- err
			}
			return err
		}))
	sessionv1.RegisterSessionServiceServer(srv, &appendstream.Server{SessionServiceServer: svc, Limits: lim})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return sessionv1.NewSessionServiceClient(conn), ended
}

func heldBatch(session string, from, n int) *sessionv1.AppendBatch {
	b := &sessionv1.AppendBatch{}
	for i := range n {
		b.Appends = append(b.Appends, &sessionv1.TaggedAppend{Tag: uint64(from + i), Request: asyncReq(session, fmt.Sprint(from+i))})
	}
	return b
}

// Appends handed to AppendAsync hold their place in the stream's budget
// until their outcome is sent: past MaxAppends undecided, the node stops
// taking the stream's appends, and serves the rest once some are answered.
func TestAsyncAppendsKeepToTheStreamBudget(t *testing.T) {
	const maxAppends = 16
	svc := &holding{release: make(chan struct{}), held: make(chan struct{}, 3*maxAppends)}
	api, _ := limitedAsync(t, svc, appendstream.Limits{MaxAppends: maxAppends})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := api.AppendBatches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(heldBatch("hold", 0, 3*maxAppends)); err != nil {
		t.Fatal(err)
	}
	for range maxAppends {
		<-svc.held
	}
	close(svc.release)
	for answered := 0; answered < 3*maxAppends; {
		m, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		answered += len(m.GetOutcomes())
	}
	if peak := svc.peakUndecided(); peak != maxAppends {
		t.Fatalf("%d appends of one stream were undecided at once, want the bound %d", peak, maxAppends)
	}
}

// A client that never reads its outcomes: the stream is served up to its
// budget, then ends RESOURCE_EXHAUSTED once a send stayed blocked for
// SendTimeout, as on the worker path.
func TestAsyncUnreadStreamEnds(t *testing.T) {
	const maxAppends = 64
	svc := &holding{reply: 2048}
	api, ended := limitedAsync(t, svc, appendstream.Limits{MaxAppends: maxAppends, SendTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := api.AppendBatches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for n := 0; ; n += 256 {
			if s.Send(heldBatch("unread", n, 256)) != nil {
				return
			}
		}
	}()
	select {
	case err := <-ended:
		if errs.CodeOf(err) != errs.ResourceExhaustedCode || !strings.Contains(err.Error(), "were not read") {
			t.Fatalf("the unread stream ended with %v, want RESOURCE_EXHAUSTED naming the unread outcomes", err)
		}
	case <-ctx.Done():
		t.Fatal("an unread stream was not ended within a minute")
	}
	if peak := svc.peakUndecided(); peak > maxAppends {
		t.Fatalf("%d appends were undecided at once, more than the bound %d", peak, maxAppends)
	}
}
