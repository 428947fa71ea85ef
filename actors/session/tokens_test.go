package session_test

import (
	"math"
	"testing"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// TestTokenUsageOverflowIsRefused: MaxInt64 input tokens and then one more
// were acknowledged with a negative total and left a row that could not
// be read, exported or deleted. The second update is FAILED_PRECONDITION
// now, nothing changes, and the session goes on working.
func TestTokenUsageOverflowIsRefused(t *testing.T) {
	n := startNode(t, fileURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	add := func(in, out int64, cost float64) (*sessionv1.UpdateTokenUsageResponse, error) {
		return n.svc.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: id, InputTokens: in, OutputTokens: out, Cost: cost})
	}
	if _, err := add(math.MaxInt64, 0, math.MaxFloat64); err != nil {
		t.Fatal(err)
	}
	for _, d := range [][3]float64{{1, 0, 0}, {0, 0, math.MaxFloat64}} {
		_, err := add(int64(d[0]), int64(d[1]), d[2])
		wantCode(t, err, errs.FailedPreconditionCode)
	}
	if r, err := add(0, 7, 0); err != nil || r.GetTotal().GetInputTokens() != math.MaxInt64 || r.GetTotal().GetOutputTokens() != 7 {
		t.Fatalf("an update that fits after refused ones: %v, %v", r, err)
	}
	got := n.get(t, id).GetTokenUsage()
	if got.GetInputTokens() != math.MaxInt64 || got.GetOutputTokens() != 7 || got.GetCost() != math.MaxFloat64 {
		t.Fatalf("stored totals %v", got)
	}
	if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("m")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id}); err != nil {
		t.Fatalf("export: %v", err)
	}
	if l, err := n.svc.List(ctx, &sessionv1.ListSessionsRequest{}); err != nil || len(l.GetSessions()) != 1 {
		t.Fatalf("list: %v, %v", l, err)
	}
	if _, err := n.svc.Delete(ctx, &sessionv1.DeleteSessionRequest{SessionId: id}); err != nil {
		t.Fatalf("delete: %v", err)
	}
}
