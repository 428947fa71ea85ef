package session_test

import (
	"errors"
	"testing"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
)

func replaceReq(id string, removeLast, expect int64, msgs ...*sessionv1.NewMessage) *sessionv1.ReplaceSuffixRequest {
	return &sessionv1.ReplaceSuffixRequest{SessionId: id, From: &sessionv1.ReplaceSuffixRequest_RemoveLast{RemoveLast: removeLast},
		ExpectedNextSequence: &expect, Messages: msgs}
}

func withID(m *sessionv1.NewMessage) *sessionv1.NewMessage { m.MessageId = ids.New(); return m }

// TestReplaceSuffixWarmAndCold: the owner decides a replacement on its
// head, warm or after a passivation (a cold owner loads first), keeps its
// next sequence right after it (a later append continues at the cut), and
// answers a retry as a duplicate.
func TestReplaceSuffixWarmAndCold(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{ExpirySweepInterval: -1}, nil)
	ctx := ctxT(t)
	id := n.create(t, "r")
	for _, c := range []string{"a", "b", "c"} {
		if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg(c)}}); err != nil {
			t.Fatal(err)
		}
	}
	req := replaceReq(id, 2, 3, withID(userMsg("B")))
	r, err := n.svc.ReplaceSuffix(ctx, req)
	if err != nil || r.GetDuplicate() || r.GetNextSequence() != 2 || len(r.GetRemoved()) != 2 ||
		r.GetRemoved()[0].GetContent() != "b" || r.GetMessages()[0].GetSequence() != 1 {
		t.Fatalf("replace: %v %v", r, err)
	}
	again, err := n.svc.ReplaceSuffix(ctx, req)
	if err != nil || !again.GetDuplicate() || again.GetMessages()[0].GetSequence() != 1 || again.GetNextSequence() != 2 {
		t.Fatalf("retry: %v %v", again, err)
	}
	if a, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("d")}}); err != nil || a.GetMessages()[0].GetSequence() != 2 {
		t.Fatalf("append after the replacement: %v %v", a, err)
	}
	// A pure pop with a stale expectation is a mismatch naming the head.
	_, err = n.svc.ReplaceSuffix(ctx, replaceReq(id, 1, 2))
	var mm *persistence.SequenceMismatchError
	if !errors.As(err, &mm) || mm.Next != 3 {
		t.Fatalf("stale pop: %v", err)
	}
	// Cold: the owner passivates; the next owner loads before deciding.
	n.svc.PassivateAll()
	if err := n.svc.WaitPassivated(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := n.svc.ReplaceSuffix(ctx, replaceReq(id, 1, 3)); err != nil || r.GetNextSequence() != 2 || r.GetRemoved()[0].GetContent() != "d" {
		t.Fatalf("cold pop: %v %v", r, err)
	}
	n.svc.PassivateAll()
	if err := n.svc.WaitPassivated(ctx); err != nil {
		t.Fatal(err)
	}
	// A cold owner's first append goes blind; a replacement after it
	// still decides on the loaded head.
	if a, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("e")}}); err != nil || a.GetMessages()[0].GetSequence() != 2 {
		t.Fatalf("blind append: %v %v", a, err)
	}
	if r, err := n.svc.ReplaceSuffix(ctx, replaceReq(id, 3, 3, withID(userMsg("only")))); err != nil || r.GetNextSequence() != 1 || len(r.GetRemoved()) != 3 {
		t.Fatalf("replace all: %v %v", r, err)
	}
	ms := n.messages(t, id)
	checkDense(t, ms)
	if len(ms) != 1 || ms[0].GetContent() != "only" || n.get(t, id).GetMessageCount() != 1 {
		t.Fatalf("history: %v", ms)
	}
}

func TestReplaceSuffixRefusals(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{ExpirySweepInterval: -1}, nil)
	ctx := ctxT(t)
	id := n.create(t, "r")
	_, err := n.svc.ReplaceSuffix(ctx, &sessionv1.ReplaceSuffixRequest{SessionId: id, From: &sessionv1.ReplaceSuffixRequest_RemoveLast{}})
	wantCode(t, err, errs.InvalidArgumentCode)
	zero := int64(0)
	_, err = n.svc.ReplaceSuffix(ctx, &sessionv1.ReplaceSuffixRequest{SessionId: id, ExpectedNextSequence: &zero})
	wantCode(t, err, errs.InvalidArgumentCode)
	_, err = n.svc.ReplaceSuffix(ctx, replaceReq(ids.New(), 0, 0))
	wantCode(t, err, errs.NotFoundCode)
	if _, err := n.svc.Close(ctx, &sessionv1.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	_, err = n.svc.ReplaceSuffix(ctx, replaceReq(id, 0, 0, userMsg("x")))
	wantCode(t, err, errs.FailedPreconditionCode)
}
