package session_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/lifecycle/lifecycletest"
	"github.com/agentstate/agentstate/actors/session"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
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
// writer, reading through reader: a second directory, which owns sessions
// independently of n.svc, as another cluster member would
// (secondService reads through n's store).
func startSecond(tb testing.TB, n *node, reader persistence.Reader) *session.Service {
	tb.Helper()
	svc, err := session.Start(n.sys, n.wr, reader, session.Config{Name: "sessions-b"})
	if err != nil {
		tb.Fatalf("second session.Start: %v", err)
	}
	// Registered after n's cleanup, so it runs first: before the audit
	// actor stops.
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
	// b's actor is cold: it activates with its first append, which the
	// store numbers (a blind append).
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
	lifecycletest.WantFenced(t, err)
	checkDense(t, n.messages(t, id))
}

// loadHook is a Reader that runs after, once, when GetSession read id,
// and counts the loads of id.
type loadHook struct {
	persistence.Reader
	id    string
	armed atomic.Bool
	after func()
	loads atomic.Int64
}

func (h *loadHook) GetSession(ctx context.Context, id string) (*sessionv1.Session, error) {
	s, err := h.Reader.GetSession(ctx, id)
	if id == h.id {
		h.loads.Add(1)
		if h.armed.CompareAndSwap(true, false) {
			h.after()
		}
	}
	return s, err
}

// TestBlindAppend: a cold actor's first appends are decided with no load
// (lifecycle.Folding.Blind): the store numbers them after what the older
// actor stored and applies their state deltas to the stored state. The
// actor then knows the session only in part: the next appends need no
// load, a token update loads first and answers the stored total.
func TestBlindAppend(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	a := n.svc
	ctx := ctxT(t)
	id := n.create(t, "blind")
	if _, err := a.UpdateState(ctx, &sessionv1.UpdateStateRequest{SessionId: id,
		StateDelta: &sessionv1.StateDelta{SetJson: map[string]string{"k": "1"}}}); err != nil {
		t.Fatalf("UpdateState through a: %v", err)
	}
	for i := range 2 {
		if _, err := appendOne(ctx, a, id, ids.New(), "a"); err != nil {
			t.Fatalf("append %d through a: %v", i, err)
		}
	}
	if _, err := a.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: id, InputTokens: 5}); err != nil {
		t.Fatalf("token usage through a: %v", err)
	}

	hook := &loadHook{Reader: n.store.Reader(), id: id}
	b := startSecond(t, n, hook)
	r, err := appendOne(ctx, b, id, ids.New(), "b")
	if err != nil || r.GetMessages()[0].GetSequence() != 2 || r.GetNextSequence() != 3 {
		t.Fatalf("blind append through b: %v %v, want sequence 2", r, err)
	}
	u, err := b.UpdateState(ctx, &sessionv1.UpdateStateRequest{SessionId: id,
		StateDelta: &sessionv1.StateDelta{SetJson: map[string]string{"j": "2"}}})
	if err != nil || u.GetStateJson() != `{"j":2,"k":1}` || u.GetNextSequence() != 3 {
		t.Fatalf("UpdateState through b: %v %v, want {\"j\":2,\"k\":1} (the stored state and the delta) at 3", u, err)
	}
	if got := hook.loads.Load(); got != 0 {
		t.Fatalf("b loaded the session %d times for appends, want 0", got)
	}
	tr, err := b.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: id, InputTokens: 1})
	if err != nil || tr.GetTotal().GetInputTokens() != 6 {
		t.Fatalf("token usage through b: %v %v, want a total of 6", tr, err)
	}
	if got := hook.loads.Load(); got != 1 {
		t.Fatalf("b loaded the session %d times, want 1 (before the token update)", got)
	}
	_, err = appendOne(ctx, a, id, ids.New(), "a")
	lifecycletest.WantFenced(t, err)
	checkDense(t, n.messages(t, id))
}

// TestBlindAppendRefused: a blind append to a session that is closed, or
// missing, is refused by the store (persistence.ErrBlindRefused), storing
// nothing; the actor activates alone, loads and answers as a loaded one
// does.
func TestBlindAppendRefused(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "closed")
	if _, err := n.svc.Close(ctx, &sessionv1.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b := secondService(t, n)
	_, err := appendOne(ctx, b, id, ids.New(), "x")
	if errs.CodeOf(err) != errs.FailedPreconditionCode {
		t.Fatalf("append to a closed session through a cold actor: %v, want FAILED_PRECONDITION", err)
	}
	if ms := n.messages(t, id); len(ms) != 0 {
		t.Fatalf("a closed session took %d messages", len(ms))
	}
	_, err = appendOne(ctx, b, ids.New(), ids.New(), "x")
	if errs.CodeOf(err) != errs.NotFoundCode {
		t.Fatalf("append to a missing session through a cold actor: %v, want NOT_FOUND", err)
	}
}

// TestBlindAppendAudited: with Config.AuditMessages, a cold actor's append
// is not blind: its message_appended entry names the session's actor,
// which only a load tells. (Decided blind, the entry named no actor.)
func TestBlindAppendAudited(t *testing.T) {
	cfg := session.Config{AuditMessages: true}
	n := startNode(t, memURL(t), cfg, nil)
	ctx := ctxT(t)
	id := n.create(t, "audited")

	hook := &loadHook{Reader: n.store.Reader(), id: id}
	cfg.Name = "sessions-b"
	b, err := session.Start(n.sys, n.wr, hook, cfg)
	if err != nil {
		t.Fatalf("second session.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Stop(context.Background()); err != nil {
			t.Errorf("second sessions Stop: %v", err)
		}
	})
	if _, err := appendOne(ctx, b, id, ids.New(), "x"); err != nil {
		t.Fatalf("append through b: %v", err)
	}
	if got := hook.loads.Load(); got != 1 {
		t.Fatalf("b loaded the session %d times, want 1", got)
	}
	entries, err := n.store.Reader().ListAudit(ctx, &auditv1.Filter{EventType: "message_appended", SessionId: id}, "", 10)
	if err != nil || len(entries) != 1 || entries[0].GetActorName() != "audited" {
		t.Fatalf("message_appended entries %v (%v), want one naming actor audited", entries, err)
	}
}

// TestFoldedLoadWentStale: the older actor writes after the cold actor
// loaded for a conditional append (not blind: it is decided against the
// load) and before its folded activation commits. The write moves no
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

	zero := int64(0)
	r, err := b.Append(ctx, &sessionv1.AppendRequest{SessionId: id, ExpectedNextSequence: &zero,
		Messages: []*sessionv1.NewMessage{{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER, Content: "0"}}})
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
	lifecycletest.WantFenced(t, err)
}
