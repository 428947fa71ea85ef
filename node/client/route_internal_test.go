package client

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// idleConn is a connection that is never used: grpc.NewClient does no I/O.
func idleConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func hint(addr string) metadata.MD { return metadata.Pairs(sessionv1.OwnerHeader, addr) }

// The routes and the owners stay within their bounds; an owner with a
// call in flight is never closed to make room.
func TestOwnerRouterStaysBounded(t *testing.T) {
	r := NewOwnerRouter(grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer r.Close()
	r.maxRoutes, r.maxOwners = 8, 3
	cc := idleConn(t, "127.0.0.1:1")
	for i := range 100 {
		r.learn(cc, routeKey{id: fmt.Sprint("s", i)}, hint(fmt.Sprintf("127.0.0.1:%d", 2+i%2)))
		if len(r.routes) > r.maxRoutes {
			t.Fatalf("%d routes after %d hints, want at most %d", len(r.routes), i+1, r.maxRoutes)
		}
	}
	if len(r.routes) != r.maxRoutes || len(r.owners) != 2 {
		t.Fatalf("%d routes and %d owners, want %d and 2", len(r.routes), len(r.owners), r.maxRoutes)
	}
	// A third owner fills the table; with all three busy, a fourth is not
	// dialled and its hint is dropped.
	r.learn(cc, routeKey{id: "x"}, hint("127.0.0.1:4"))
	busy := []*owner{r.owners["127.0.0.1:2"], r.owners["127.0.0.1:3"], r.owners["127.0.0.1:4"]}
	for _, o := range busy {
		o.inflight.Add(1)
	}
	r.learn(cc, routeKey{id: "y"}, hint("127.0.0.1:5"))
	if len(r.owners) != 3 || r.lookup(routeKey{id: "y"}) != nil {
		t.Fatalf("a fourth owner while three are busy: %d owners, route %v", len(r.owners), r.routes[routeKey{id: "y"}])
	}
	// One idle: it makes room, and the routes to it are void.
	busy[0].inflight.Add(-1)
	r.learn(cc, routeKey{id: "y"}, hint("127.0.0.1:5"))
	if len(r.owners) != 3 || r.owners["127.0.0.1:2"] != nil || !busy[0].gone {
		t.Fatalf("owners %v: want the idle one replaced", r.owners)
	}
	if busy[0].conn.GetState() != connectivity.Shutdown {
		t.Fatal("the replaced owner's connection is open")
	}
	if o := r.lookup(routeKey{id: "y"}); o == nil || o.addr != "127.0.0.1:5" {
		t.Fatalf("route of y: %v", o)
	}
	for k, o := range r.routes {
		if o == busy[0] && r.lookup(k) != nil {
			t.Fatalf("a route to the replaced owner is still followed: %v", k)
		}
	}
	// A hint naming the connection's own member routes through it again.
	r.learn(cc, routeKey{id: "y"}, hint("127.0.0.1:1"))
	if r.lookup(routeKey{id: "y"}) != nil {
		t.Fatal("a hint naming the connection's member kept the route")
	}
	// Not host:port: nothing to dial.
	r.learn(cc, routeKey{id: "z"}, hint("no port"))
	if r.lookup(routeKey{id: "z"}) != nil {
		t.Fatal("a hint without a port was followed")
	}
}

// The owners' connections close when the routed connection closes.
func TestOwnerRouterClosesWithItsConnection(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sessionv1.RegisterSessionServiceServer(srv, hinting{owner: "127.0.0.1:2"})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	defer srv.Stop()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	r := NewOwnerRouter(opts...)
	cc, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{r.DialOption()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := sessionv1.NewSessionServiceClient(cc).Get(ctx, &sessionv1.GetSessionRequest{SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	o := r.lookup(routeKey{id: "s"})
	if o == nil {
		t.Fatal("no route learned")
	}
	o.inflight.Add(-1)
	cc.Close()
	select {
	case <-r.done:
	case <-ctx.Done():
		t.Fatal("the router was not closed with its connection")
	}
	if o.conn.GetState() != connectivity.Shutdown {
		t.Fatal("the owner's connection is open")
	}
	if st := r.Stats(); st.Hinted != 1 || st.Routed != 0 {
		t.Fatalf("stats %+v, want one hint, nothing routed", st)
	}
}

// hinting names owner on every answer.
type hinting struct {
	sessionv1.UnimplementedSessionServiceServer
	owner string
}

func (h hinting) Get(ctx context.Context, _ *sessionv1.GetSessionRequest) (*sessionv1.GetSessionResponse, error) {
	return &sessionv1.GetSessionResponse{}, grpc.SetHeader(ctx, hint(h.owner))
}

// The router's own cost on a request it keys but has no route for (every
// request on a single node): the lookup and the header option.
func BenchmarkOwnerRouterUnrouted(b *testing.B) {
	r := NewOwnerRouter()
	defer r.Close()
	cc, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	req := &sessionv1.AppendRequest{SessionId: "s1"}
	invoke := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := r.intercept(ctx, sessionv1.SessionService_Append_FullMethodName, req, nil, cc, invoke); err != nil {
			b.Fatal(err)
		}
	}
}
