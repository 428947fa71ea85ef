package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
)

// A disk that fills up mid-turn: the whole turn is absent, and the next
// append gets the next dense sequence.
func TestDiskFullMidTurn(t *testing.T) {
	n := startNode(t, fileURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	sid := n.create(t, "a")
	for i := 0; i < 3; i++ {
		if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{userMsg("small")}}); err != nil {
			t.Fatal(err)
		}
	}
	pages, err := n.store.PageCount()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.store.SetMaxPageCount(pages); err != nil {
		t.Fatal(err)
	}
	// Small messages first, so that a partial turn would be visible.
	big := strings.Repeat("x", 512<<10)
	turn := turnWithIDs(sid, ids.New(), ids.New(), ids.New())
	turn.Messages[2].Content = big
	_, err = n.svc.Append(ctx, turn)
	wantCode(t, err, errs.ResourceExhaustedCode)

	msgs := n.messages(t, sid)
	checkDense(t, msgs)
	if len(msgs) != 3 {
		t.Fatalf("%d messages after the failed turn, want 3", len(msgs))
	}
	if got := n.get(t, sid).GetMessageCount(); got != 3 {
		t.Fatalf("message_count %d after the failed turn", got)
	}

	if err := n.store.SetMaxPageCount(1 << 30); err != nil {
		t.Fatal(err)
	}
	r, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{userMsg("after")}})
	if err != nil {
		t.Fatal(err)
	}
	if seq := r.GetMessages()[0].GetSequence(); seq != 3 {
		t.Fatalf("next append got sequence %d, want 3", seq)
	}
	// The failed turn was not stored, so sending it again stores it.
	r, err = n.svc.Append(ctx, turn)
	if err != nil {
		t.Fatal(err)
	}
	if r.GetDuplicate() || r.GetMessages()[0].GetSequence() != 4 || r.GetMessages()[2].GetSequence() != 6 {
		t.Fatalf("resent turn answered %v", r)
	}
	checkDense(t, n.messages(t, sid))
}

// Idle actors passivate after the idle timeout and come back with their
// state reloaded from the store.
func TestIdlePassivationAndReload(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{IdleTimeout: 20 * time.Millisecond}, nil)
	ctx := ctxT(t)
	sid := n.create(t, "a")
	first := turnWithIDs(sid, ids.New())
	orig, err := n.svc.Append(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.svc.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: sid, InputTokens: 7}); err != nil {
		t.Fatal(err)
	}
	if err := session.WaitNoActors(ctx, n.svc); err != nil {
		t.Fatal(err)
	}
	if n.svc.ActiveActors() != 0 {
		t.Fatalf("%d actors alive after the idle timeout", n.svc.ActiveActors())
	}
	r, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{userMsg("second")}})
	if err != nil || r.GetMessages()[0].GetSequence() != 1 {
		t.Fatalf("append after reactivation: %v %v", r, err)
	}
	if act := session.Activations(n.svc); act < 2 {
		t.Fatalf("%d activations; the actor never passivated", act)
	}
	u, err := n.svc.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: sid, InputTokens: 1})
	if err != nil || u.GetTotal().GetInputTokens() != 8 {
		t.Fatalf("token totals after reactivation: %v %v", u, err)
	}
	dup, err := n.svc.Append(ctx, first)
	if err != nil || !dup.GetDuplicate() || !sameAppended(dup, orig) {
		t.Fatalf("retry after reactivation: %v %v", dup, err)
	}
}

// Requests for ids that do not exist do not leave actors behind.
func TestUnknownSessionActorsDoNotLinger(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	for i := 0; i < 20; i++ {
		_, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: ids.New(), Messages: []*sessionv1.NewMessage{userMsg("x")}})
		wantCode(t, err, errs.NotFoundCode)
	}
	if err := session.WaitNoActors(ctx, n.svc); err != nil {
		t.Fatal(err)
	}
}

func TestStopRefusesNewRequests(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	sid := n.create(t, "a")
	if err := n.svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n.svc.ActiveActors() != 0 {
		t.Fatalf("%d actors alive after Stop", n.svc.ActiveActors())
	}
	_, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{userMsg("x")}})
	wantCode(t, err, errs.UnavailableCode)
	// Reads still work until the store closes.
	if got := n.get(t, sid); got.GetSessionId() != sid {
		t.Fatalf("get after Stop: %v", got)
	}
}
