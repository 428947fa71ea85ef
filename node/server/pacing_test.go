package server

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// answeringSessions answers every append at once and counts them.
type answeringSessions struct {
	sessionv1.UnimplementedSessionServiceServer
	reached atomic.Int64
}

func (a *answeringSessions) Append(context.Context, *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	a.reached.Add(1)
	return &sessionv1.AppendResponse{}, nil
}

// TestPrincipalAheadOfItsShareOfTheWorkRateIsHeld: with 256 KiB/s of work
// shared, a principal alone is never held, however large its appends; once
// another principal is active, each runs at 128 KiB/s, so a 256 KiB append
// puts the flooding one two seconds ahead, and its next request is refused
// on its headers (RESOURCE_EXHAUSTED, never reaching the service), while
// the other principal's small appends (9 KiB of work each, 70 ms of its
// share) are served.
func TestPrincipalAheadOfItsShareOfTheWorkRateIsHeld(t *testing.T) {
	ids := floodAndHonest(t)
	svc := &answeringSessions{}
	addr := serveSessions(t, svc, apiOptions{MaxRecvBytes: 4 << 20, Identities: ids, ShareRate: 256 << 10})
	flood, honest := dialSessions(t, addr, "flood-token"), dialSessions(t, addr, "honest-token")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	large := &sessionv1.AppendRequest{SessionId: "s", Messages: []*sessionv1.NewMessage{{Content: strings.Repeat("x", 256<<10)}}}
	small := &sessionv1.AppendRequest{SessionId: "s", Messages: []*sessionv1.NewMessage{{Content: strings.Repeat("y", 1<<10)}}}

	// Alone, ten large appends (2.5 MiB of work, ten seconds of a share)
	// are all served.
	for i := range 10 {
		if _, err := flood.Append(ctx, large); err != nil {
			t.Fatalf("the flood's append %d, alone: %v", i, err)
		}
	}
	// Another principal arrives: the flood carried no debt from when it
	// was alone, so its next append is served, and puts it 2 s ahead.
	if _, err := honest.Append(ctx, small); err != nil {
		t.Fatalf("honest's first append: %v", err)
	}
	if _, err := flood.Append(ctx, large); err != nil {
		t.Fatalf("the flood's first append beside honest: %v", err)
	}
	before := svc.reached.Load()
	_, err := flood.Append(ctx, large)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "ahead of its share") {
		t.Fatalf("the flood's append 2 s ahead of its share: %v, want RESOURCE_EXHAUSTED naming its share", err)
	}
	if n := svc.reached.Load(); n != before {
		t.Fatalf("the refused append reached the service (%d appends, want %d)", n, before)
	}
	for i := range 3 {
		if _, err := honest.Append(ctx, small); err != nil {
			t.Fatalf("honest's append %d beside the held flood: %v", i, err)
		}
	}
}
