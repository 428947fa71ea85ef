package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/protobuf/proto"
)

// A request of another service sent to the audit actor (as a remote peer
// addressing "audit" by mistake would) is answered with INVALID_ARGUMENT
// naming its type, not dropped for its sender to time out; the actor keeps
// serving its own requests afterwards.
func TestRemoteWrongTypeIsAnswered(t *testing.T) {
	st, _ := openFile(t, "")
	sys := newSystem(t)
	svc := start(t, sys, st, writer.Config{})
	for _, msg := range []proto.Message{
		&sessionv1.GetSessionRequest{SessionId: "x"},
		&planv1.HistoryRequest{PlanId: "p"},
		&commonv1.Error{Message: "not a request"},
	} {
		res, err := sys.Root.RequestFuture(svc.PID(), msg, 10*time.Second).Result()
		if err != nil {
			t.Fatalf("%T sent to audit: %v (never answered)", msg, err)
		}
		e, ok := res.(*commonv1.Error)
		if !ok || e.GetCode() != errs.InvalidArgumentCode || !strings.Contains(e.GetMessage(), "audit service cannot serve") {
			t.Fatalf("%T sent to audit answered %v, want INVALID_ARGUMENT", msg, res)
		}
	}
	res, err := sys.Root.RequestFuture(svc.PID(), &auditv1.CountRequest{}, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("count after the refusals: %v", err)
	}
	if _, ok := res.(*auditv1.CountResponse); !ok {
		t.Fatalf("count after the refusals answered %v", res)
	}
}
