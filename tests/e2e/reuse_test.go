package e2e_test

import (
	"strings"
	"testing"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestReusedIDsOverGRPC: a client-chosen message id or record id reused
// with other content is ALREADY_EXISTS naming it, over gRPC, and stores
// nothing; the exact retry is still answered as a duplicate.
func TestReusedIDsOverGRPC(t *testing.T) {
	n := startNode(t)
	ctx := ctxT(t)
	sessions := sessionv1.NewSessionServiceClient(n.conn())
	cr, err := sessions.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "reuse"})
	if err != nil {
		t.Fatal(err)
	}
	sid, mid := cr.GetSession().GetSessionId(), ids.New()
	turn := func(content string) *sessionv1.AppendRequest {
		return &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: content, MessageId: mid}}}
	}
	if _, err := sessions.Append(ctx, turn("original")); err != nil {
		t.Fatal(err)
	}
	_, err = sessions.Append(ctx, turn("other content"))
	if status.Code(err) != codes.AlreadyExists || !strings.Contains(status.Convert(err).Message(), mid) {
		t.Fatalf("reused message id: %v; want ALREADY_EXISTS naming %s", err, mid)
	}
	if r, err := sessions.Append(ctx, turn("original")); err != nil || !r.GetDuplicate() {
		t.Fatalf("exact retry: %v, %v", r, err)
	}
	lm, err := sessions.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid})
	if err != nil || len(lm.GetMessages()) != 1 || lm.GetMessages()[0].GetContent() != "original" {
		t.Fatalf("stored %v, %v", lm.GetMessages(), err)
	}

	plans := planv1.NewPlanServiceClient(n.conn())
	rid := ids.New()
	rec := func(msg string) *planv1.RecordErrorRequest {
		return &planv1.RecordErrorRequest{PlanId: "reuse", Phase: planv1.Phase_PHASE_EXECUTE, StepId: "s", ErrorType: "TimeoutError", Message: msg, RecordId: rid}
	}
	if _, err := plans.RecordError(ctx, rec("slow")); err != nil {
		t.Fatal(err)
	}
	_, err = plans.RecordError(ctx, rec("slower"))
	if status.Code(err) != codes.AlreadyExists || !strings.Contains(status.Convert(err).Message(), rid) {
		t.Fatalf("reused record id: %v; want ALREADY_EXISTS naming %s", err, rid)
	}
	if r, err := plans.RecordError(ctx, rec("slow")); err != nil || !r.GetDuplicate() {
		t.Fatalf("exact record retry: %v, %v", r, err)
	}
}
