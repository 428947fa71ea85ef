package server

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/node/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// holdingSessions holds every append until release closes, and counts the
// appends that reached it (decoded).
type holdingSessions struct {
	sessionv1.UnimplementedSessionServiceServer
	held    chan struct{}
	release chan struct{}
	reached atomic.Int64
}

func (h *holdingSessions) Append(_ context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	h.reached.Add(1)
	h.held <- struct{}{}
	<-h.release
	return &sessionv1.AppendResponse{}, nil
}

// TestLargeRequestsPastTheRequestBudgetAreRefusedUndecoded: issue 15, 48
// callers of 3 MiB appends at once held 350 MiB of a node, most of it
// decoded requests and the buffers they were decoded from, while the
// writer's byte budget counted each once. With room for 1 MiB of requests
// (each counted twice its size), one 300 KB append is served and a second
// at the same time is refused RESOURCE_EXHAUSTED without reaching the
// service; once the first is answered, the next is served; a request
// larger than the whole budget is served alone.
func TestLargeRequestsPastTheRequestBudgetAreRefusedUndecoded(t *testing.T) {
	svc := &holdingSessions{held: make(chan struct{}, 4), release: make(chan struct{})}
	conn, err := client.Dial(serveSessions(t, svc, apiOptions{MaxRecvBytes: 4 << 20, RequestBytes: 1 << 20}), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	api := sessionv1.NewSessionServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	appendOf := func(size int) *sessionv1.AppendRequest {
		return &sessionv1.AppendRequest{SessionId: "s", Messages: []*sessionv1.NewMessage{{Content: strings.Repeat("x", size)}}}
	}

	first := make(chan error, 1)
	go func() {
		_, err := api.Append(ctx, appendOf(300<<10))
		first <- err
	}()
	<-svc.held
	_, err = api.Append(ctx, appendOf(300<<10))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--grpc-request-bytes") {
		t.Fatalf("a second 300 KB append beside one in flight, with room for 1 MiB counted twice: %v, want RESOURCE_EXHAUSTED naming --grpc-request-bytes", err)
	}
	if errs.CodeOf(err) != errs.ResourceExhaustedCode {
		t.Fatalf("the refusal carries no typed error: %v", err)
	}
	if n := svc.reached.Load(); n != 1 {
		t.Fatalf("%d appends reached the service, want 1: the refused one was decoded and served", n)
	}
	close(svc.release)
	if err := <-first; err != nil {
		t.Fatalf("the first append: %v", err)
	}
	if _, err := api.Append(ctx, appendOf(300<<10)); err != nil {
		t.Fatalf("an append after the first was answered: %v", err)
	}
	<-svc.held
	if _, err := api.Append(ctx, appendOf(2<<20)); err != nil {
		t.Fatalf("an append larger than the whole budget, alone: %v", err)
	}
	<-svc.held
}
