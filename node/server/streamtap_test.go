package server

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// recordingAudit is an audit service whose Record goes to rec (the
// authenticator's auth_failure entries).
type recordingAudit struct {
	auditv1.UnimplementedAuditServiceServer
	rec *fakeRecorder
}

func (a recordingAudit) Record(ctx context.Context, req *auditv1.RecordRequest) (*auditv1.RecordResponse, error) {
	return a.rec.Record(ctx, req)
}

// serveTapped serves an API over TCP with opt, its sessions held by svc,
// and returns it, a connection to it and a context for the test's calls.
// released (may be nil) is called when a stream's slot comes back.
func serveTapped(t *testing.T, svc *holdingSessions, rec *fakeRecorder, m *metrics, opt apiOptions, released func()) (*apiServer, *grpc.ClientConn, context.Context) {
	t.Helper()
	opt.MaxRecvBytes, opt.MarkNetwork = 4<<20, writer.NoWait
	a, err := newAPIServer(apiServices{Sessions: svc, Plans: planv1.UnimplementedPlanServiceServer{}, Audit: recordingAudit{rec: rec}},
		opt, m, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	a.tap.released = released // before serving: the transport reads it
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.serve(lis) }()
	t.Cleanup(a.srv.Stop)
	conn, err := client.Dial(lis.Addr().String(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return a, conn, ctx
}

// TestStreamWithoutTokenIsRefusedOnItsHeaders: the bearer token is checked
// on a stream's headers, so a stranger cannot make the node receive,
// charge and decode a request (up to --max-recv-bytes on each of its
// streams). A call that sends its headers and no request at all gets
// UNAUTHENTICATED: a check after the request was read would leave it
// waiting for one. While an authenticated append fills most of the request
// budget, a stranger's 3 MiB append is UNAUTHENTICATED, not refused by the
// budget as the same append with the token is: gRPC decodes a unary
// request (through the budget) before the interceptors run, where the
// token used to be checked. Each refusal is counted and audited as before.
func TestStreamWithoutTokenIsRefusedOnItsHeaders(t *testing.T) {
	svc := &holdingSessions{held: make(chan struct{}, 4), release: make(chan struct{})}
	rec, m := &fakeRecorder{}, newMetrics()
	a, conn, ctx := serveTapped(t, svc, rec, m, apiOptions{Token: "s3cret", RequestBytes: 1 << 20}, nil)
	const appendMethod = "/agentstate.session.v1.SessionService/Append"

	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, appendMethod)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.RecvMsg(&sessionv1.AppendResponse{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a call that sent no request and no token: %v, want UNAUTHENTICATED on its headers alone", err)
	}

	api := sessionv1.NewSessionServiceClient(conn)
	appendOf := func(size int) *sessionv1.AppendRequest {
		return &sessionv1.AppendRequest{SessionId: "s", Messages: []*sessionv1.NewMessage{{Content: strings.Repeat("x", size)}}}
	}
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")
	first := make(chan error, 1)
	go func() {
		_, err := api.Append(authed, appendOf(300<<10))
		first <- err
	}()
	<-svc.held // 600 KB of the 1 MiB budget charged

	if _, err := api.Append(ctx, appendOf(3<<20)); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a 3 MiB append without a token: %v, want UNAUTHENTICATED (before the request budget)", err)
	}
	bad := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer nope")
	if _, err := api.Append(bad, appendOf(3<<20)); status.Code(err) != codes.Unauthenticated || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a 3 MiB append with a wrong token: %v, want UNAUTHENTICATED without the token", err)
	}
	if _, err := api.Append(authed, appendOf(3<<20)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the same append with the token: %v, want RESOURCE_EXHAUSTED from the request budget", err)
	}
	close(svc.release)
	if err := <-first; err != nil {
		t.Fatalf("the held append: %v", err)
	}
	if n := svc.reached.Load(); n != 1 {
		t.Fatalf("%d appends reached the service, want 1", n)
	}
	if got := counterValue(t, m.authFailures); got != 3 {
		t.Fatalf("auth failures = %v, want 3", got)
	}
	if got := counterValue(t, m.requests.WithLabelValues(appendMethod, codes.Unauthenticated.String())); got != 3 {
		t.Fatalf("requests{Append, Unauthenticated} = %v, want 3", got)
	}
	a.auditor.close() // waits for the entries' hand-over
	if len(rec.reqs) != 3 {
		t.Fatalf("%d auth_failure entries, want 3", len(rec.reqs))
	}
}

// TestStreamsPastTheNodeWideBoundAreRefused: with room for two streams on
// the whole node, a third call is refused RESOURCE_EXHAUSTED while two are
// held; a slot comes back when a held call is cancelled by its client,
// when a call ends, and when a call names an unknown method (which gRPC
// ends without a stats.End).
func TestStreamsPastTheNodeWideBoundAreRefused(t *testing.T) {
	svc := &holdingSessions{held: make(chan struct{}, 4), release: make(chan struct{})}
	m := newMetrics()
	released := make(chan struct{}, 16)
	a, conn, ctx := serveTapped(t, svc, &fakeRecorder{}, m, apiOptions{StreamsTotal: 2}, func() { released <- struct{}{} })
	// slotBack waits for an admitted stream's slot to come back.
	slotBack := func(what string) {
		t.Helper()
		select {
		case <-released:
		case <-ctx.Done():
			t.Fatalf("%s: its stream slot did not come back", what)
		}
	}
	api := sessionv1.NewSessionServiceClient(conn)
	req := &sessionv1.AppendRequest{SessionId: "s", Messages: []*sessionv1.NewMessage{{Content: "x"}}}

	results := make(chan error, 4)
	call := func(ctx context.Context) {
		go func() {
			_, err := api.Append(ctx, req)
			results <- err
		}()
	}
	first, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	call(first)
	call(ctx)
	<-svc.held
	<-svc.held
	_, err := api.Append(ctx, req)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--grpc-max-streams-total") {
		t.Fatalf("a third call beside two held ones: %v, want RESOURCE_EXHAUSTED naming --grpc-max-streams-total", err)
	}
	if got := counterValue(t, m.streamsRefused); got != 1 {
		t.Fatalf("streams refused = %v, want 1", got)
	}

	cancelFirst()
	if err := <-results; err == nil || !strings.Contains(err.Error(), "Canceled") {
		t.Fatalf("the cancelled call: %v, want it cancelled", err)
	}
	slotBack("a call cancelled by its client")
	call(ctx) // takes the cancelled call's slot
	<-svc.held
	if n := svc.reached.Load(); n != 3 {
		t.Fatalf("%d calls reached the service, want 3", n)
	}

	close(svc.release)
	for range 2 {
		if err := <-results; err != nil {
			t.Fatalf("a held call: %v", err)
		}
	}
	// The handler of the cancelled call returns too; it gave its slot back
	// when its client cancelled, so two more come back now.
	slotBack("a call that ended")
	slotBack("a call that ended")
	if err := conn.Invoke(ctx, "/agentstate.nothing.v1.Nothing/Here", req, &sessionv1.AppendResponse{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("an unknown method: %v, want UNIMPLEMENTED", err)
	}
	slotBack("a call to an unknown method")
	if n := a.tap.inUse(); n != 0 {
		t.Fatalf("%d stream slots in use after every call ended, want 0", n)
	}
	for range 2 {
		call(ctx)
	}
	for range 2 {
		if err := <-results; err != nil {
			t.Fatalf("a call after the others ended: %v", err)
		}
	}
}
