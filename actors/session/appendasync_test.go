package session_test

import (
	"testing"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// asyncOutcome is one AppendAsync answer.
type asyncOutcome struct {
	resp *sessionv1.AppendResponse
	err  error
}

// appendAsync starts one AppendAsync and returns where its answers go
// (room for two, so that a second answer shows instead of blocking).
func appendAsync(tb testing.TB, n *node, req *sessionv1.AppendRequest) chan asyncOutcome {
	tb.Helper()
	ch := make(chan asyncOutcome, 2)
	n.svc.AppendAsync(ctxT(tb), req, func(resp *sessionv1.AppendResponse, err error) {
		ch <- asyncOutcome{resp, err}
	})
	return ch
}

// Concurrent AppendAsync calls are each answered once, with the sequence
// they were stored at, as blocking Appends are.
func TestAppendAsyncAnswersEachAppendOnceWithItsSequence(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	id := n.create(t, "coder")
	const appends = 64
	answers := make([]chan asyncOutcome, appends)
	for i := range answers {
		answers[i] = appendAsync(t, n, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("m")}})
	}
	seen := map[int64]bool{}
	for i, ch := range answers {
		o := <-ch
		if o.err != nil {
			t.Fatalf("append %d: %v", i, o.err)
		}
		seq := o.resp.GetMessages()[0].GetSequence()
		if seen[seq] {
			t.Fatalf("append %d answered sequence %d, answered before", i, seq)
		}
		seen[seq] = true
		select {
		case extra := <-ch:
			t.Fatalf("append %d answered twice: %v", i, extra)
		default:
		}
	}
	msgs := n.messages(t, id)
	if len(msgs) != appends {
		t.Fatalf("%d messages stored, want %d", len(msgs), appends)
	}
	checkDense(t, msgs)
	for _, m := range msgs {
		if !seen[m.GetSequence()] {
			t.Fatalf("stored sequence %d was not answered", m.GetSequence())
		}
	}
}

// A request the façade refuses is answered on the caller's goroutine,
// before AppendAsync returns, with the same typed error as Append's, and
// stores nothing.
func TestAppendAsyncRefusesInvalidRequestsAtOnce(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	id := n.create(t, "coder")
	for name, req := range map[string]*sessionv1.AppendRequest{
		"no session":  {Messages: []*sessionv1.NewMessage{userMsg("m")}},
		"no messages": {SessionId: id},
		"no role":     {SessionId: id, Messages: []*sessionv1.NewMessage{{Content: "m"}}},
	} {
		ch := appendAsync(t, n, req)
		select {
		case o := <-ch:
			wantCode(t, o.err, errs.InvalidArgumentCode)
		default:
			t.Fatalf("%s: not answered when AppendAsync returned", name)
		}
	}
	// An unknown session is decided by its owner, later: NOT_FOUND.
	o := <-appendAsync(t, n, &sessionv1.AppendRequest{SessionId: "01JZZZZZZZZZZZZZZZZZZZZZZZ", Messages: []*sessionv1.NewMessage{userMsg("m")}})
	if _, blocking := n.svc.Append(ctxT(t), &sessionv1.AppendRequest{SessionId: "01JZZZZZZZZZZZZZZZZZZZZZZZ", Messages: []*sessionv1.NewMessage{userMsg("m")}}); errs.CodeOf(o.err) != errs.CodeOf(blocking) || o.err == nil {
		t.Fatalf("unknown session: AppendAsync %v, Append %v: want the same error", o.err, blocking)
	}
	if msgs := n.messages(t, id); len(msgs) != 0 {
		t.Fatalf("%d messages stored by refused appends", len(msgs))
	}
}
