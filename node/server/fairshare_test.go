package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestFloodingPrincipalLeavesAnotherItsShareOfRequests: with room for
// 1 MiB of requests in flight (each counted twice its size), a flooding
// principal fills it with appends the service holds; an honest principal's
// append is refused by the full budget, and from then on the flood is
// held to half: its next streams are refused on their headers (before
// their bytes are assembled) while it holds its share, and the room its
// answered appends give back goes to the honest principal.
func TestFloodingPrincipalLeavesAnotherItsShareOfRequests(t *testing.T) {
	hash := func(tok string) string {
		h := sha256.Sum256([]byte(tok))
		return hex.EncodeToString(h[:])
	}
	ids, err := parseIdentities([]byte(fmt.Sprintf(`{"principals": [
		{"name": "flood", "token_sha256": [%q], "grants": [{"namespace": "*", "role": "admin"}]},
		{"name": "honest", "token_sha256": [%q], "grants": [{"namespace": "*", "role": "admin"}]}]}`,
		hash("flood-token"), hash("honest-token"))))
	if err != nil {
		t.Fatal(err)
	}
	svc := &holdingSessions{held: make(chan struct{}, 16), release: make(chan struct{})}
	a, err := newAPIServer(apiServices{
		Sessions: svc,
		Plans:    planv1.UnimplementedPlanServiceServer{},
		Audit:    auditv1.UnimplementedAuditServiceServer{},
	}, apiOptions{MaxRecvBytes: 4 << 20, RequestBytes: 1 << 20, Identities: ids}, newMetrics(), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.srv.Serve(lis) }()
	t.Cleanup(a.srv.Stop)
	api := func(token string) sessionv1.SessionServiceClient {
		conn, err := client.Dial(lis.Addr().String(), client.Options{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return sessionv1.NewSessionServiceClient(conn)
	}
	flood, honest := api("flood-token"), api("honest-token")
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
	_, err = flood.Append(ctx, req)
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
