package e2e_test

import (
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestTimeBoundsOverGRPC: prune and filter bounds far outside the stores'
// nanosecond range mean what they say (older than 1600 once removed the
// whole trail); Go's zero time is a bound, only an unset older_than is
// missing.
func TestTimeBoundsOverGRPC(t *testing.T) {
	n := startNode(t)
	ctx := ctxT(t)
	if _, err := sessionv1.NewSessionServiceClient(n.conn()).Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "times"}); err != nil {
		t.Fatal(err)
	}
	audits := auditv1.NewAuditServiceClient(n.conn())
	if _, err := audits.Flush(ctx, &auditv1.FlushRequest{}); err != nil {
		t.Fatal(err)
	}
	count := func(f *auditv1.Filter) int64 {
		t.Helper()
		r, err := audits.Count(ctx, &auditv1.CountRequest{Filter: f})
		if err != nil {
			t.Fatalf("count %v: %v", f, err)
		}
		return r.GetCount()
	}
	all := count(nil)
	if all == 0 {
		t.Fatal("no audit entries to prune")
	}
	y1600, y3000 := timestamppb.New(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)), timestamppb.New(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, older := range []*timestamppb.Timestamp{y1600, timestamppb.New(time.Time{})} {
		r, err := audits.Prune(ctx, &auditv1.PruneRequest{OlderThan: older})
		if err != nil || r.GetRemoved() != 0 {
			t.Fatalf("prune older than %v: %v, %v; want nothing removed", older.AsTime(), r, err)
		}
	}
	if _, err := audits.Prune(ctx, &auditv1.PruneRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("prune without older_than: %v", err)
	}
	// Each prune recorded its own audit_pruned entry; nothing else went.
	if got := count(&auditv1.Filter{EventType: "audit_pruned"}); count(nil) != all+got || got != 2 {
		t.Fatalf("after the prunes: %d entries, %d audit_pruned; want %d + 2", count(nil), got, all)
	}
	all = count(nil)
	for _, c := range []struct {
		f    *auditv1.Filter
		want int64
	}{
		{&auditv1.Filter{Since: y1600}, all},
		{&auditv1.Filter{Until: y3000}, all},
		{&auditv1.Filter{Until: y1600}, 0},
		{&auditv1.Filter{Since: y3000}, 0},
	} {
		if got := count(c.f); got != c.want {
			t.Fatalf("count %v: %d, want %d", c.f, got, c.want)
		}
	}
}
