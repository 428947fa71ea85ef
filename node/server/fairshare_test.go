package server

import (
	"context"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// TestFloodingPrincipalLeavesAnotherItsShareOfRequests: with room for
// 1 MiB of requests in flight (each counted twice its size), a flooding
// principal fills it with appends the service holds; an honest principal's
// append is refused by the full budget, and from then on the flood is
// held to half: its next streams are refused on their headers (before
// their bytes are assembled) while it holds its share, and the room its
// answered appends give back goes to the honest principal.
func TestFloodingPrincipalLeavesAnotherItsShareOfRequests(t *testing.T) {
	ids := floodAndHonest(t)
	svc := &holdingSessions{held: make(chan struct{}, 16), release: make(chan struct{})}
	addr := serveSessions(t, svc, apiOptions{MaxRecvBytes: 4 << 20, RequestBytes: 1 << 20, Identities: ids})
	flood, honest := dialSessions(t, addr, "flood-token"), dialSessions(t, addr, "honest-token")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := &sessionv1.AppendRequest{SessionId: "s", Messages: []*sessionv1.NewMessage{{Content: strings.Repeat("x", 150<<10)}}}

	// The flood, alone, takes the whole budget: three appends of 150 KB
	// (300 KB each as counted) are held in flight.
	answered := make(chan error, 8)
	for range 3 {
		go func() {
			_, err := flood.Append(ctx, req)
			answered <- err
		}()
		<-svc.held
	}
	if _, err := honest.Append(ctx, req); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("honest's append against a full budget: %v, want RESOURCE_EXHAUSTED", err)
	}
	// Honest was refused: the flood, holding 900 KB, is over its half.
	_, err := flood.Append(ctx, req)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), `principal "flood"`) {
		t.Fatalf("the flood's append over its share: %v, want RESOURCE_EXHAUSTED naming its share", err)
	}
	if n := svc.reached.Load(); n != 3 {
		t.Fatalf("%d appends reached the service, want the flood's 3", n)
	}
	// One flood append is answered: the room goes to honest, whose
	// append is served beside the flood's two.
	svc.release <- struct{}{}
	if err := <-answered; err != nil {
		t.Fatalf("the flood's held append: %v", err)
	}
	go func() {
		_, err := honest.Append(ctx, req)
		answered <- err
	}()
	<-svc.held
	if _, err := flood.Append(ctx, req); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the flood holding 600 KB of its 512 KB share was served: %v", err)
	}
	close(svc.release)
	for range 3 {
		if err := <-answered; err != nil {
			t.Fatalf("a held append: %v", err)
		}
	}
}

// TestTapApportionsStreamsByPrincipal: with room for 4 streams, a flooding
// principal takes all 4; another's stream is refused by the full node, and
// from then on the flood is held to 2: its streams that end give their
// slots to the other principal.
func TestTapApportionsStreamsByPrincipal(t *testing.T) {
	ids := floodAndHonest(t)
	m := newMetrics()
	fa := newFailureAuditor(&fakeRecorder{}, nil, m, quietLog())
	defer fa.close()
	tp := newStreamTap(newAuthenticatorWith(ids, fa, m, quietLog()), 4, m, quietLog())
	released := make(chan struct{}, 16)
	tp.released = func() { released <- struct{}{} }
	const method = "/agentstate.session.v1.SessionService/Get"
	open := func(token string) (context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(context.Background())
		_, err := tp.handle(ctx, &tap.Info{FullMethodName: method, Header: metadata.Pairs("authorization", "Bearer "+token)})
		if err != nil {
			cancel()
			return nil, err
		}
		return cancel, nil
	}
	var flood []context.CancelFunc
	for range 4 {
		end, err := open("flood-token")
		if err != nil {
			t.Fatalf("the flood, alone, refused a stream of the 4: %v", err)
		}
		flood = append(flood, end)
	}
	if _, err := open("honest-token"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("honest's stream on a full node: %v, want RESOURCE_EXHAUSTED", err)
	}
	// Two of the flood's streams end; it opens again: refused at its
	// share of 2 once it holds 2, so honest gets the slots it gave back.
	for _, end := range flood[:2] {
		end()
	}
	for range 2 { // the transport's context ends release on goroutines of their own
		<-released
	}
	if _, err := open("flood-token"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), `principal "flood"`) {
		t.Fatalf("the flood at its share of streams: %v, want RESOURCE_EXHAUSTED naming its share", err)
	}
	for range 2 {
		end, err := open("honest-token")
		if err != nil {
			t.Fatalf("honest refused a slot the flood gave back: %v", err)
		}
		defer end()
	}
	for _, end := range flood[2:] {
		end()
	}
}

// TestAlonePrincipalsStreamsAreNotRefusedOnHeaders: a principal alone
// holding the whole request budget still has its streams admitted on
// their headers (a tail beside a burst of large requests); once another
// principal is refused, its streams are refused there until it is under
// its share.
func TestAlonePrincipalsStreamsAreNotRefusedOnHeaders(t *testing.T) {
	b := newRequestBudget(100)
	b.shares.Take("a", 100)
	if b.overShare("a") {
		t.Fatal("a principal alone, holding the whole budget, is refused on its streams' headers")
	}
	b.shares.Refused("b")
	if !b.overShare("a") {
		t.Fatal("a principal over its half beside a refused one is not refused on its streams' headers")
	}
	b.shares.Give("a", 60)
	if b.overShare("a") {
		t.Fatal("a principal under its share is refused on its streams' headers")
	}
	b.shares.Give("a", 40)
}
