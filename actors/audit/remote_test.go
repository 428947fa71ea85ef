package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/audit/audittest"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// A request of another service sent to the audit actor (as a remote peer
// addressing "audit" by mistake would) is answered with INVALID_ARGUMENT
// naming its type, not dropped for its sender to time out; the actor keeps
// serving its own requests afterwards.
func TestRemoteWrongTypeIsAnswered(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	sys := audittest.NewSystem(t)
	svc := audittest.Start(t, sys, st, writer.Config{})
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

// Remote senders' requests are admitted without waiting: once
// RemoteInFlight of them are being served, the rest of a batch of reads is
// refused with RESOURCE_EXHAUSTED at once (instead of each starting a
// goroutine and an answer: one batch of 20,000 reads drove a node to
// gigabytes); once they finish, requests are served again.
func TestRemoteRequestsPastTheBoundAreRefused(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	g := audittest.Gate(st)
	sys := audittest.NewSystem(t)
	svc := audittest.Start(t, sys, g, writer.Config{}, audit.Config{RemoteInFlight: 4})
	entered, release := g.Hold()
	defer release()
	audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged})
	<-entered // the writer is held: a flush waits for it

	var held []*actor.Future
	for range 4 {
		held = append(held, sys.Root.RequestFuture(svc.PID(), &auditv1.FlushRequest{}, 30*time.Second))
	}
	const reads = 2000
	futures := make([]*actor.Future, reads)
	for i := range futures {
		futures[i] = sys.Root.RequestFuture(svc.PID(), &auditv1.ListRequest{}, 30*time.Second)
	}
	for i, f := range futures {
		res, err := f.Result()
		if err != nil {
			t.Fatalf("read %d: %v (never answered)", i, err)
		}
		if e, ok := res.(*commonv1.Error); !ok || e.GetCode() != errs.ResourceExhaustedCode {
			t.Fatalf("read %d past the bound answered %v, want RESOURCE_EXHAUSTED", i, res)
		}
	}
	release()
	for i, f := range held {
		if res, err := f.Result(); err != nil {
			t.Fatalf("flush %d: %v", i, err)
		} else if _, ok := res.(*auditv1.FlushResponse); !ok {
			t.Fatalf("flush %d answered %v", i, res)
		}
	}
	res, err := sys.Root.RequestFuture(svc.PID(), &auditv1.CountRequest{}, 10*time.Second).Result()
	if _, ok := res.(*auditv1.CountResponse); err != nil || !ok {
		t.Fatalf("count once the bound is free: %v, %v", res, err)
	}
}
