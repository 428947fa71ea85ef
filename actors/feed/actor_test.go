package feed_test

import (
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/feed"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// collector is a subscriber actor: it subscribes with its request, acks
// every event it receives, and hands everything to out.
type collector struct {
	feedPID *actor.PID
	req     proto.Message
	out     chan proto.Message
}

func (c *collector) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Request(c.feedPID, c.req)
	case *feedv1.SessionEvent:
		ctx.Send(c.feedPID, &feedv1.Ack{SubscriptionId: m.GetSubscriptionId(), Events: 1})
		c.out <- m
	case *feedv1.ChangeEvent:
		ctx.Send(c.feedPID, &feedv1.Ack{SubscriptionId: m.GetSubscriptionId(), Events: 1})
		c.out <- m
	case *feedv1.Subscribed, *commonv1.Error, *feedv1.SubscriptionFailed:
		c.out <- m.(proto.Message)
	}
}

func receive(t *testing.T, out chan proto.Message) proto.Message {
	t.Helper()
	select {
	case m := <-out:
		return m
	case <-time.After(time.Minute):
		t.Fatal("no event within a minute")
		return nil
	}
}

// An actor subscribes with a window of 2 (more events than that reach it
// only as it acks), gets the session's messages in order, and its
// subscription ends when it stops.
func TestActorSubscriberGetsEventsAndIsUnsubscribedWhenItStops(t *testing.T) {
	e := newEnv(t, feed.Config{}, false)
	fpid, err := feed.StartActor(e.sys, e.hub, "")
	if err != nil {
		t.Fatal(err)
	}
	id := e.create()
	e.appendN(id, 5)
	out := make(chan proto.Message, 64)
	sub, err := e.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &collector{feedPID: fpid, req: &feedv1.TailSessionRequest{SessionId: id, Window: 2}, out: out}
	}), "subscriber")
	if err != nil {
		t.Fatal(err)
	}
	first, ok := receive(t, out).(*feedv1.Subscribed)
	if !ok {
		t.Fatalf("first reply %v, want Subscribed", first)
	}
	var v sessionView
	for len(v.seqs) < 5 {
		ev := receive(t, out).(*feedv1.SessionEvent)
		if ev.GetSubscriptionId() != first.GetSubscriptionId() {
			t.Fatalf("event of subscription %q, want %q", ev.GetSubscriptionId(), first.GetSubscriptionId())
		}
		v.take([]*feedv1.SessionEvent{ev})
	}
	e.appendN(id, 3)
	for len(v.seqs) < 8 {
		v.take([]*feedv1.SessionEvent{receive(t, out).(*feedv1.SessionEvent)})
	}
	dense(t, v.seqs, 0, 8)
	if n := e.hub.Tails(); n != 1 {
		t.Fatalf("%d tails open, want 1", n)
	}
	if err := e.sys.Root.StopFuture(sub).Wait(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.hub.Tails() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stopped subscriber's tail is still open")
		}
		time.Sleep(time.Millisecond) // polling a condition, not ordering events
	}
}

func TestActorRefusesBadSubscriptions(t *testing.T) {
	e := newEnv(t, feed.Config{}, false)
	fpid, err := feed.StartActor(e.sys, e.hub, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req  proto.Message
		code errs.Code
	}{
		{&feedv1.TailSessionRequest{SessionId: ids.New()}, errs.NotFoundCode},
		{&feedv1.TailChangesRequest{Window: feed.MaxWindow + 1}, errs.InvalidArgumentCode},
		{&sessionv1.GetSessionRequest{SessionId: ids.New()}, errs.InvalidArgumentCode},
	} {
		res, err := e.sys.Root.RequestFuture(fpid, c.req, 30*time.Second).Result()
		if err != nil {
			t.Fatalf("%T: %v", c.req, err)
		}
		if got, ok := res.(*commonv1.Error); !ok || got.GetCode() != c.code {
			t.Fatalf("%T answered %v, want %v", c.req, res, c.code)
		}
	}
}
