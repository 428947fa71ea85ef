package client_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/node/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// member is a fake cluster member: it names an owner in the OwnerHeader
// of the answers for the sessions and plans given in hints, as a member
// that forwarded them does, fails those given in fails, and records what
// it served.
type member struct {
	sessionv1.UnimplementedSessionServiceServer
	planv1.UnimplementedPlanServiceServer
	addr string
	srv  *grpc.Server

	mu     sync.Mutex
	hints  map[string]string // id (plan: namespace/id) → owner address
	fails  map[string]error  // id → the error of its next request
	served []string
}

func startMember(t *testing.T) *member {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &member{addr: lis.Addr().String(), srv: grpc.NewServer(), hints: map[string]string{}, fails: map[string]error{}}
	sessionv1.RegisterSessionServiceServer(m.srv, m)
	planv1.RegisterPlanServiceServer(m.srv, m)
	go m.srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(m.srv.Stop)
	return m
}

func (m *member) hint(id, owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if owner == "" {
		delete(m.hints, id)
	} else {
		m.hints[id] = owner
	}
}

func (m *member) failNext(id string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fails[id] = err
}

// count is how many requests for id m served (answered or failed).
func (m *member) count(id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.served {
		if s == id {
			n++
		}
	}
	return n
}

func (m *member) serve(ctx context.Context, id string) error {
	m.mu.Lock()
	m.served = append(m.served, id)
	owner, failure := m.hints[id], m.fails[id]
	delete(m.fails, id)
	m.mu.Unlock()
	md := metadata.Pairs("x-member", m.addr)
	if owner != "" {
		md.Append(sessionv1.OwnerHeader, owner)
	}
	if err := grpc.SetHeader(ctx, md); err != nil {
		return err
	}
	return failure
}

func (m *member) Get(ctx context.Context, r *sessionv1.GetSessionRequest) (*sessionv1.GetSessionResponse, error) {
	return &sessionv1.GetSessionResponse{}, m.serve(ctx, r.GetSessionId())
}

func (m *member) Append(ctx context.Context, r *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	return &sessionv1.AppendResponse{}, m.serve(ctx, r.GetSessionId())
}

func (m *member) List(ctx context.Context, _ *sessionv1.ListSessionsRequest) (*sessionv1.ListSessionsResponse, error) {
	return &sessionv1.ListSessionsResponse{}, m.serve(ctx, "list")
}

func (m *member) RecordError(ctx context.Context, r *planv1.RecordErrorRequest) (*planv1.RecordErrorResponse, error) {
	return &planv1.RecordErrorResponse{}, m.serve(ctx, r.GetNamespace()+"/"+r.GetPlanId())
}

// routedConn dials a with routing to owners.
func routedConn(t *testing.T, a *member) *grpc.ClientConn {
	t.Helper()
	conn, err := client.Dial(a.addr, client.Options{RouteToOwner: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func appendTo(ctx context.Context, s sessionv1.SessionServiceClient, id string, opts ...grpc.CallOption) error {
	_, err := s.Append(ctx, &sessionv1.AppendRequest{SessionId: id}, opts...)
	return err
}

// mustAppend appends to id and fails the test on an error.
func mustAppend(ctx context.Context, t *testing.T, s sessionv1.SessionServiceClient, id string) {
	t.Helper()
	if err := appendTo(ctx, s, id); err != nil {
		t.Fatalf("append to %s: %v", id, err)
	}
}

// want fails the test unless m served id n times.
func want(t *testing.T, m *member, name, id string, n int) {
	t.Helper()
	if got := m.count(id); got != n {
		t.Fatalf("%s served %s %d times, want %d", name, id, got, n)
	}
}

// After A names B the owner of a session, that session's requests go to
// B, the others' still to A; a caller's own Header option still gets the
// answer's header.
func TestRouteToOwnerSendsANamedSessionToItsOwner(t *testing.T) {
	a, b := startMember(t), startMember(t)
	a.hint("s1", b.addr)
	s := sessionv1.NewSessionServiceClient(routedConn(t, a))
	ctx := testContext(t)

	var md metadata.MD
	if err := appendTo(ctx, s, "s1", grpc.Header(&md)); err != nil {
		t.Fatal(err)
	}
	if got := md.Get(sessionv1.OwnerHeader); len(got) != 1 || got[0] != b.addr {
		t.Fatalf("the caller's header: %v, want the owner %s", md, b.addr)
	}
	want(t, a, "A", "s1", 1)
	for range 3 {
		md = nil
		if err := appendTo(ctx, s, "s1", grpc.Header(&md)); err != nil {
			t.Fatal(err)
		}
		if got := md.Get("x-member"); len(got) != 1 || got[0] != b.addr {
			t.Fatalf("the caller's header of a routed call: %v, want B's", md)
		}
	}
	if _, err := s.Get(ctx, &sessionv1.GetSessionRequest{SessionId: "s1"}); err != nil {
		t.Fatal(err)
	}
	want(t, a, "A", "s1", 1)
	want(t, b, "B", "s1", 4)

	mustAppend(ctx, t, s, "s2")
	if _, err := s.List(ctx, &sessionv1.ListSessionsRequest{}); err != nil {
		t.Fatal(err)
	}
	want(t, a, "A", "s2", 1)
	want(t, b, "B", "s2", 0)
	want(t, a, "A", "list", 1)
}

// Plans are routed by namespace and plan id.
func TestRouteToOwnerKeysPlansByNamespace(t *testing.T) {
	a, b := startMember(t), startMember(t)
	a.hint("team/p1", b.addr)
	p := planv1.NewPlanServiceClient(routedConn(t, a))
	ctx := testContext(t)
	record := func(ns string) {
		t.Helper()
		if _, err := p.RecordError(ctx, &planv1.RecordErrorRequest{PlanId: "p1", Namespace: ns}); err != nil {
			t.Fatal(err)
		}
	}
	record("team")
	record("team")
	record("other")
	want(t, a, "A", "team/p1", 1)
	want(t, b, "B", "team/p1", 1)
	want(t, a, "A", "other/p1", 1)
}

// A routed member's UNAVAILABLE (it stored nothing) sends the request
// once more to A and forgets the route; a failure that may have stored
// something is the caller's, and keeps the route.
func TestRouteToOwnerFallsBackOnUnavailable(t *testing.T) {
	a, b := startMember(t), startMember(t)
	a.hint("s1", b.addr)
	s := sessionv1.NewSessionServiceClient(routedConn(t, a))
	ctx := testContext(t)
	mustAppend(ctx, t, s, "s1") // A names B
	a.hint("s1", "")            // A now owns it
	b.failNext("s1", errs.Unavailable("the owner is stopping"))
	if err := appendTo(ctx, s, "s1"); err != nil {
		t.Fatalf("append after B's UNAVAILABLE: %v, want A's answer", err)
	}
	want(t, a, "A", "s1", 2)
	want(t, b, "B", "s1", 1)
	mustAppend(ctx, t, s, "s1")
	want(t, a, "A", "s1", 3)
	want(t, b, "B", "s1", 1)

	// B fails a request with a code that does not promise nothing was
	// stored: the caller gets it, and the route stays.
	a.hint("s1", b.addr)
	mustAppend(ctx, t, s, "s1")
	b.failNext("s1", errs.OutcomeUnknown("the commit's answer was lost"))
	if err := appendTo(ctx, s, "s1"); !errors.Is(err, errs.ErrOutcomeUnknown) {
		t.Fatalf("append failed by B: %v, want its OUTCOME_UNKNOWN", err)
	}
	mustAppend(ctx, t, s, "s1")
	want(t, a, "A", "s1", 4)
	want(t, b, "B", "s1", 3)
}

// A request routed to a member that is gone is not sent: it goes to A.
func TestRouteToOwnerFallsBackWhenTheOwnerIsGone(t *testing.T) {
	a := startMember(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := lis.Addr().String()
	lis.Close()
	a.hint("s1", gone)
	s := sessionv1.NewSessionServiceClient(routedConn(t, a))
	ctx := testContext(t)
	for range 2 {
		if err := appendTo(ctx, s, "s1"); err != nil {
			t.Fatalf("append with its owner gone: %v, want A's answer", err)
		}
	}
	want(t, a, "A", "s1", 2)
}

// B, routed to, names another owner C: the route follows it.
func TestRouteToOwnerFollowsARoutedMembersHint(t *testing.T) {
	a, b, c := startMember(t), startMember(t), startMember(t)
	a.hint("s1", b.addr)
	b.hint("s1", c.addr)
	s := sessionv1.NewSessionServiceClient(routedConn(t, a))
	ctx := testContext(t)
	for range 3 {
		mustAppend(ctx, t, s, "s1")
	}
	want(t, a, "A", "s1", 1)
	want(t, b, "B", "s1", 1)
	want(t, c, "C", "s1", 1)
}

// Callers at once: every request is served once, by A until the route is
// known (at most once per caller and session), then by B.
func TestRouteToOwnerIsSafeForConcurrentCallers(t *testing.T) {
	a, b := startMember(t), startMember(t)
	ids := []string{"s0", "s1", "s2", "s3", "s4"}
	for _, id := range ids {
		a.hint(id, b.addr)
	}
	s := sessionv1.NewSessionServiceClient(routedConn(t, a))
	ctx := testContext(t)
	const callers, each = 8, 25
	var wg sync.WaitGroup
	errc := make(chan error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := appendTo(ctx, s, ids[(c+i)%len(ids)]); err != nil {
					errc <- err
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
	total := 0
	for _, id := range ids {
		onA := a.count(id)
		if onA < 1 || onA > callers {
			t.Errorf("A served %s %d times, want 1 to %d", id, onA, callers)
		}
		total += onA + b.count(id)
	}
	if total != callers*each {
		t.Fatalf("%d requests served, want %d", total, callers*each)
	}
}
