package session_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	"github.com/agentstate/agentstate/actors/writer"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
)

// commandCount counts the commands the writer applied (committed or
// failed on their own).
type commandCount struct{ n atomic.Int64 }

func (c *commandCount) BatchCommitted(commands, _ int, _ time.Duration, err error) {
	if err == nil {
		c.n.Add(int64(commands))
	}
}
func (c *commandCount) AsyncRetried(int, error) {}
func (c *commandCount) AsyncLost(int, error)    {}

// startSecond starts another sessions service on n's actor system and
// writer, reading through reader (secondService, with a reader of the
// test's).
func startSecond(tb testing.TB, n *node, reader persistence.Reader) *session.Service {
	tb.Helper()
	svc, err := session.Start(n.sys, n.wr, reader, session.Config{Name: "sessions-b"})
	if err != nil {
		tb.Fatalf("second session.Start: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			tb.Errorf("second sessions Stop: %v", err)
		}
	})
	return svc
}

// TestFoldedActivation: a fresh actor's create, and a cold actor's first
// append, each take one command through the writer, the activation
// folded into it (lifecycle.Folding), where they took an activation and
// the write; the folded activation fences the older actor like any other.
func TestFoldedActivation(t *testing.T) {
	cmds := &commandCount{}
	n := startNodeWith(t, memURL(t), writer.Config{Observer: cmds}, session.Config{}, nil)
	a, b := n.svc, secondService(t, n)
	ctx := ctxT(t)

	id := n.create(t, "folded")
	if got := cmds.n.Load(); got != 1 {
		t.Fatalf("a create took %d commands, want 1 (the activation carrying it)", got)
	}
	r, err := appendOne(ctx, a, id, ids.New(), "0")
	if err != nil || r.GetMessages()[0].GetSequence() != 0 {
		t.Fatalf("append through a: %v %v", r, err)
	}
	// b's actor is cold: it loads, then activates with its first append.
	before := cmds.n.Load()
	r, err = appendOne(ctx, b, id, ids.New(), "1")
	if err != nil || r.GetMessages()[0].GetSequence() != 1 || r.GetNextSequence() != 2 {
		t.Fatalf("append through b: %v %v, want sequence 1", r, err)
	}
	if got := cmds.n.Load() - before; got != 1 {
		t.Fatalf("a cold actor's first append took %d commands, want 1", got)
	}
	// Its activation fenced a's actor.
	_, err = appendOne(ctx, a, id, ids.New(), "2")
	wantFenced(t, err)
	checkDense(t, n.messages(t, id))
}

// loadHook is a Reader that runs after, once, when GetSession read id.
type loadHook struct {
	persistence.Reader
	id    string
	armed atomic.Bool
	after func()
}

func (h *loadHook) GetSession(ctx context.Context, id string) (*sessionv1.Session, error) {
	s, err := h.Reader.GetSession(ctx, id)
	if id == h.id && h.armed.CompareAndSwap(true, false) {
		h.after()
	}
	return s, err
}

// TestFoldedLoadWentStale: the older actor writes after the cold actor
// loaded and before its folded activation commits. The write moves no
// sequence (token usage), so only the load's mark tells: the store refuses
// the folded append (persistence.ErrLoadedChanged), and the actor
// activates alone, loads again and appends. Had the fold committed, the
// actor would hold the token total of its stale load and answer the next
// update with it.
func TestFoldedLoadWentStale(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	a := n.svc
	ctx := ctxT(t)
	id := n.create(t, "stale")

	hook := &loadHook{Reader: n.store.Reader(), id: id}
	var olderErr error
	hook.after = func() {
		// On b's actor, between its load and its decision: a's actor
		// (epoch 1, still current) commits a write.
		_, olderErr = a.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: id, InputTokens: 5})
	}
	hook.armed.Store(true)
	b := startSecond(t, n, hook)

	r, err := appendOne(ctx, b, id, ids.New(), "0")
	if err != nil || r.GetMessages()[0].GetSequence() != 0 {
		t.Fatalf("append through b: %v %v, want sequence 0", r, err)
	}
	if olderErr != nil {
		t.Fatalf("the older actor's write: %v", olderErr)
	}
	tr, err := b.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: id, InputTokens: 1})
	if err != nil || tr.GetTotal().GetInputTokens() != 6 {
		t.Fatalf("token usage through b: %v %v, want a total of 6 (5 by the older actor, then 1)", tr, err)
	}
	if got := session.Activations(b); got != 1 {
		t.Fatalf("b activated %d actors, want 1 (the refused fold is retried by the same actor)", got)
	}
	_, err = a.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: id, InputTokens: 1})
	wantFenced(t, err)
}
