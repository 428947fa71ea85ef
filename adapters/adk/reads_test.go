package adk_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/adapters/adk"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/adk/session"
)

// counting is a Store that counts the messages it is sent back.
type counting struct {
	adk.Store
	messages atomic.Int64
}

func (c *counting) ListMessages(ctx context.Context, req *sessionv1.ListMessagesRequest) (*sessionv1.ListMessagesResponse, error) {
	resp, err := c.Store.ListMessages(ctx, req)
	c.messages.Add(int64(len(resp.GetMessages())))
	return resp, err
}

// Get's state costs no message read, and NumRecentEvents and After are
// the server's filters: only the events returned cross from the store.
func TestGetReadsOnlyWhatItReturns(t *testing.T) {
	e, _ := openEmbedded(t, dbPath(t))
	c := &counting{Store: e.Node.Sessions()}
	svc := adk.New(c, adk.Options{})
	h := create(t, svc, "u1", "s1", nil)
	const n = 300
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		ev := event(fmt.Sprintf("e%d", i), map[string]any{"count": i + 1})
		ev.Timestamp = base.Add(time.Duration(i) * time.Second)
		if err := svc.AppendEvent(t.Context(), h, ev); err != nil {
			t.Fatal(err)
		}
	}
	c.messages.Store(0)
	r, err := svc.Get(t.Context(), &session.GetRequest{AppName: "app", UserID: "u1", SessionID: "s1", NumRecentEvents: 2})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Session.State().Get("count"); v != float64(n) {
		t.Errorf("count = %v; want %d", v, n)
	}
	if evs := r.Session.Events(); evs.Len() != 2 || evs.At(0).ID != "e298" || evs.At(1).ID != "e299" {
		t.Errorf("the last two events: %d of them", evs.Len())
	}
	if got := c.messages.Load(); got != 2 {
		t.Errorf("Get with NumRecentEvents 2 read %d messages", got)
	}

	c.messages.Store(0)
	r, err = svc.Get(t.Context(), &session.GetRequest{AppName: "app", UserID: "u1", SessionID: "s1", After: base.Add(295 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if evs := r.Session.Events(); evs.Len() != 5 || evs.At(0).ID != "e295" {
		t.Errorf("events at or after the 295th second: %d, first %v", evs.Len(), evs.At(0))
	}
	if got := c.messages.Load(); got != 5 {
		t.Errorf("Get with After read %d messages", got)
	}
}

// lossy is a Store whose first Append commits and then loses its answer,
// as a connection that drops after the node committed does.
type lossy struct {
	adk.Store
	lost atomic.Bool
}

func (l *lossy) Append(ctx context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	resp, err := l.Store.Append(ctx, req)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		return nil, errs.OutcomeUnknown("the answer was lost")
	}
	return resp, err
}

// An append whose answer was lost is retried through the same handle with
// the same event: the retry finds its event stored at the expected
// sequence and succeeds, and the event is stored once.
func TestRetryAfterLostAnswer(t *testing.T) {
	e, _ := openEmbedded(t, dbPath(t))
	svc := adk.New(&lossy{Store: e.Node.Sessions()}, adk.Options{})
	h := create(t, svc, "u1", "s1", nil)
	ev := event("e1", map[string]any{"k": "v"})
	if err := svc.AppendEvent(t.Context(), h, ev); errs.CodeOf(err) != errs.OutcomeUnknownCode {
		t.Fatalf("first attempt: %v; want the lost answer", err)
	}
	if err := svc.AppendEvent(t.Context(), h, ev); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if err := svc.AppendEvent(t.Context(), h, event("e2", nil)); err != nil {
		t.Fatalf("the next append through the handle: %v", err)
	}
	got := get(t, svc, "u1", "s1")
	if got.Events().Len() != 2 || got.Events().At(0).ID != "e1" || got.Events().At(1).ID != "e2" {
		t.Fatalf("%d events stored", got.Events().Len())
	}
}
