package session_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentstate/agentstate/actors/lifecycle/lifecycletest"
	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
)

// secondService starts another sessions service on n's actor system, audit
// actor and store: a second directory, which owns sessions independently
// of n.svc, as another cluster member would.
func secondService(tb testing.TB, n *node) *session.Service {
	tb.Helper()
	return startSecond(tb, n, n.store.Reader())
}

func appendOne(ctx context.Context, svc *session.Service, sid, mid, content string) (*sessionv1.AppendResponse, error) {
	return svc.Append(ctx, &sessionv1.AppendRequest{SessionId: sid,
		Messages: []*sessionv1.NewMessage{{MessageId: mid, Role: sessionv1.Role_ROLE_USER, Content: content}}})
}

// TestFencingDoubleActivation activates one session in two directories in
// turn: each activation fences the other's actor, whose next write fails
// UNAVAILABLE and stores nothing; the actor stops, and the retry lands on
// the current owner.
func TestFencingDoubleActivation(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	a, b := n.svc, secondService(t, n)
	ctx := ctxT(t)

	id := n.create(t, "fenced") // a's actor: epoch 1
	mid := []string{ids.New(), ids.New(), ids.New(), ids.New()}
	ack := func(svc *session.Service, i int, wantSeq int64, wantDup bool) {
		t.Helper()
		r, err := appendOne(ctx, svc, id, mid[i], fmt.Sprint(i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if m := r.GetMessages()[0]; m.GetSequence() != wantSeq || m.GetMessageId() != mid[i] || r.GetDuplicate() != wantDup {
			t.Fatalf("append %d: %v, want sequence %d, duplicate %v", i, r, wantSeq, wantDup)
		}
	}
	ack(a, 0, 0, false)

	// b's actor activates (epoch 2) and loads what a's committed.
	cr, err := b.Create(ctx, &sessionv1.CreateSessionRequest{SessionId: id, ActorName: "fenced"})
	if err != nil || cr.GetCreated() || cr.GetSession().GetMessageCount() != 1 {
		t.Fatalf("create through b: %v %v, want the existing session with 1 message", cr, err)
	}
	ack(b, 1, 1, false)

	// a's actor is fenced: its write fails, stores nothing, and it stops.
	_, err = appendOne(ctx, a, id, mid[2], "2")
	lifecycletest.WantFenced(t, err)
	if err := session.WaitNoActors(ctx, a); err != nil {
		t.Fatalf("the fenced actor did not stop: %v", err)
	}
	if got := len(n.messages(t, id)); got != 2 {
		t.Fatalf("%d messages after the fenced write, want 2", got)
	}

	// The retry through a activates a fresh actor (epoch 3), which fences b's.
	ack(a, 2, 2, false)
	if got := session.Activations(a); got != 2 {
		t.Fatalf("a activated %d actors, want 2", got)
	}
	_, err = b.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: id, InputTokens: 7})
	lifecycletest.WantFenced(t, err)
	if err := session.WaitNoActors(ctx, b); err != nil {
		t.Fatalf("the fenced actor did not stop: %v", err)
	}
	tr, err := b.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: id, InputTokens: 7})
	if err != nil || tr.GetTotal().GetInputTokens() != 7 {
		t.Fatalf("token usage retried through b: %v %v, want a total of 7", tr, err)
	}

	// a's second actor is fenced now; a retried append answers from the
	// store (duplicate) through whichever actor is current.
	_, err = appendOne(ctx, a, id, mid[3], "3")
	lifecycletest.WantFenced(t, err)
	ack(b, 2, 2, true)
	ack(b, 3, 3, false)
	ack(b, 3, 3, true)

	got := n.messages(t, id)
	checkDense(t, got)
	if len(got) != 4 {
		t.Fatalf("%d messages, want 4", len(got))
	}
	for i, m := range got {
		if m.GetMessageId() != mid[i] {
			t.Fatalf("message %d is %s, want %s", i, m.GetMessageId(), mid[i])
		}
	}
	if s := n.get(t, id); s.GetTokenUsage().GetInputTokens() != 7 || s.GetMessageCount() != 4 {
		t.Fatalf("session: %v, want 7 input tokens and 4 messages", s)
	}

	// Deleting through the stale side is fenced too, then succeeds once.
	if err := session.WaitNoActors(ctx, a); err != nil {
		t.Fatal(err)
	}
	dr, err := a.Delete(ctx, &sessionv1.DeleteSessionRequest{SessionId: id})
	if err != nil || dr.GetMessagesRemoved() != 4 {
		t.Fatalf("delete through a: %v %v, want 4 messages removed", dr, err)
	}
	_, err = b.Close(ctx, &sessionv1.CloseSessionRequest{SessionId: id})
	lifecycletest.WantFenced(t, err)
	if err := session.WaitNoActors(ctx, b); err != nil {
		t.Fatal(err)
	}
	_, err = b.Close(ctx, &sessionv1.CloseSessionRequest{SessionId: id})
	wantCode(t, err, errs.NotFoundCode)
}

// TestFencingConcurrentAppends interleaves appends to one session through
// two directories: 64 senders, alternating services, each retrying a
// fenced append with the same message id through the other service. The
// history is then exactly the acknowledged appends: dense, each at its
// acknowledged sequence, none twice.
func TestFencingConcurrentAppends(t *testing.T) {
	const (
		senders = 64
		each    = 16
		retries = 500
	)
	n := startNode(t, memURL(t), session.Config{}, nil)
	svcs := [2]*session.Service{n.svc, secondService(t, n)}
	ctx := ctxT(t)
	id := n.create(t, "fenced")
	// b activates after a created the session, so a's actor is fenced
	// from the start: at least one write below is refused.
	if _, err := appendOne(ctx, svcs[1], id, ids.New(), "first"); err != nil {
		t.Fatalf("first append through b: %v", err)
	}

	acks := make([][]lifecycletest.Ack, senders)
	var fencedN atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, senders)
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				mid := ids.New()
				var (
					r   *sessionv1.AppendResponse
					err error
				)
				for try := 0; ; try++ {
					r, err = appendOne(ctx, svcs[(g+try)%2], id, mid, fmt.Sprintf("%d/%d", g, i))
					if !lifecycletest.IsFenced(err) {
						break
					}
					fencedN.Add(1)
					if try == retries {
						errc <- fmt.Errorf("sender %d append %d: still fenced after %d tries", g, i, try)
						return
					}
				}
				if err != nil {
					errc <- fmt.Errorf("sender %d append %d: %w", g, i, err)
					return
				}
				m := r.GetMessages()[0]
				if m.GetMessageId() != mid || r.GetDuplicate() {
					errc <- fmt.Errorf("sender %d append %d: answer %v", g, i, r)
					return
				}
				acks[g] = append(acks[g], lifecycletest.Ack{ID: mid, Seq: m.GetSequence()})
			}
		}(g)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	got := n.messages(t, id)
	checkDense(t, got)
	if want := 1 + senders*each; len(got) != want {
		t.Fatalf("%d messages stored, want %d", len(got), want)
	}
	at := make(map[string]int64, len(got))
	for _, m := range got {
		if _, dup := at[m.GetMessageId()]; dup {
			t.Fatalf("message %s stored twice", m.GetMessageId())
		}
		at[m.GetMessageId()] = m.GetSequence()
	}
	lifecycletest.WantAcksStored(t, "message", at, acks, fencedN.Load())
	t.Logf("%d appends, %d fenced attempts, activations %d + %d",
		senders*each, fencedN.Load(), session.Activations(svcs[0]), session.Activations(svcs[1]))
}

// TestActivationFailure: when the store cannot take the epoch, the
// requests waiting for it fail with the store's error and nothing is
// decided or stored; a later request activates and succeeds.
func TestActivationFailure(t *testing.T) {
	n := startNode(t, fileURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "ro")
	n.svc.PassivateAll()
	if err := session.WaitNoActors(ctx, n.svc); err != nil {
		t.Fatal(err)
	}
	if err := n.store.SetReadOnly(true); err != nil {
		t.Fatal(err)
	}
	_, err := appendOne(ctx, n.svc, id, ids.New(), "refused")
	wantCode(t, err, errs.UnavailableCode)
	if lifecycletest.IsFenced(err) {
		t.Fatalf("a failed activation answered as fenced: %v", err)
	}
	if err := n.store.SetReadOnly(false); err != nil {
		t.Fatal(err)
	}
	mid := ids.New()
	r, err := appendOne(ctx, n.svc, id, mid, "stored")
	if err != nil || r.GetMessages()[0].GetSequence() != 0 {
		t.Fatalf("append after the store recovered: %v %v, want sequence 0", r, err)
	}
	if got := n.messages(t, id); len(got) != 1 || got[0].GetMessageId() != mid {
		t.Fatalf("messages: %v, want only %s", got, mid)
	}
}
