package feed_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/feed"
	"github.com/agentstate/agentstate/actors/writer"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a node on a fresh file database with a hub wired to its writer.
type env struct {
	tb    testing.TB
	ctx   context.Context
	store persistence.Store
	sys   *actor.ActorSystem
	node  *actors.Node
	hub   *feed.Hub
	// stopped is set once stop ran (cleanup then skips it).
	stopped bool
	// folded counts, per session, the committed writes that rode in their
	// owner's activation (a cold owner's first write).
	mu     sync.Mutex
	folded map[string]int
}

// observe counts the commands of a commit that write a session inside an
// activation: a command that touches a session but carries no epoch of
// its own (persistence.Fence) is one taking the epoch.
func (e *env) observe(cmds []persistence.Command) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range cmds {
		if t := c.Touches(); t.Session != "" && c.Fence().Kind == 0 {
			if e.folded == nil {
				e.folded = map[string]int{}
			}
			e.folded[t.Session]++
		}
	}
}

// foldedWrites is how many of session id's writes rode in an activation.
func (e *env) foldedWrites(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.folded[id]
}

func newEnv(tb testing.TB, cfg feed.Config, sessions bool) *env {
	tb.Helper()
	store, err := sqlite.Open(filepath.Join(tb.TempDir(), "feed.db"))
	if err != nil {
		tb.Fatal(err)
	}
	return newEnvOn(tb, store, cfg, sessions)
}

// newEnvOn is newEnv on store, which the env closes.
func newEnvOn(tb testing.TB, store persistence.Store, cfg feed.Config, sessions bool) *env {
	tb.Helper()
	cfg.Logger = quiet
	hub := feed.New(store.Reader(), cfg)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	e := &env{tb: tb, ctx: context.Background(), store: store, sys: sys, hub: hub}
	onCommit := func(cmds []persistence.Command, results []persistence.Result) {
		e.observe(cmds)
		hub.OnCommit(cmds, results)
	}
	acfg := actors.Config{Writer: writer.Config{Logger: quiet, OnCommit: onCommit}}
	acfg.Sessions.AuditMessages = sessions
	node, err := actors.Start(sys, store, acfg)
	if err != nil {
		tb.Fatal(err)
	}
	e.node = node
	tb.Cleanup(func() {
		if !e.stopped {
			e.stop(time.Second)
		}
		sys.Shutdown()
		store.Close()
	})
	return e
}

// stop stops the node (its writer commits what it accepted), then closes
// the hub, giving tails d to finish.
func (e *env) stop(d time.Duration) {
	e.stopped = true
	if err := e.node.Stop(context.Background()); err != nil {
		e.tb.Errorf("node stop: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	e.hub.Close(ctx)
}

func (e *env) create() string {
	e.tb.Helper()
	r, err := e.node.Sessions().Create(e.ctx, &sessionv1.CreateSessionRequest{ActorName: "tester"})
	if err != nil {
		e.tb.Fatal(err)
	}
	return r.GetSession().GetSessionId()
}

// appendN appends n one-message turns to session id.
func (e *env) appendN(id string, n int) {
	e.tb.Helper()
	for i := 0; i < n; i++ {
		if _, err := e.node.Sessions().Append(e.ctx, &sessionv1.AppendRequest{SessionId: id,
			Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: fmt.Sprintf("m%d", i)}}}); err != nil {
			e.tb.Fatal(err)
		}
	}
}

// tailSession opens a tail of req, closed when the test ends (before
// the node stops).
func (e *env) tailSession(req *feedv1.TailSessionRequest) *feed.SessionTail {
	e.tb.Helper()
	tail, err := e.hub.TailSession(e.ctx, req)
	if err != nil {
		e.tb.Fatal(err)
	}
	e.tb.Cleanup(tail.Close)
	return tail
}

// storedMessages reads all of a session's messages from the store.
func (e *env) storedMessages(id string) []*sessionv1.Message {
	e.tb.Helper()
	var out []*sessionv1.Message
	for {
		ms, err := e.store.Reader().ListMessages(e.ctx, id, int64(len(out)), 1000)
		if err != nil {
			e.tb.Fatal(err)
		}
		if len(ms) == 0 {
			return out
		}
		out = append(out, ms...)
	}
}

// sessionView is what a session tail delivered.
type sessionView struct {
	seqs  []int64
	ids   []string
	ended feedv1.SessionEnded_Reason
	trunc [][2]int64
}

func (v *sessionView) take(evs []*feedv1.SessionEvent) {
	for _, ev := range evs {
		switch x := ev.Event.(type) {
		case *feedv1.SessionEvent_Message:
			v.seqs = append(v.seqs, x.Message.GetSequence())
			v.ids = append(v.ids, x.Message.GetMessageId())
		case *feedv1.SessionEvent_Truncated:
			v.trunc = append(v.trunc, [2]int64{x.Truncated.GetFromSequence(), x.Truncated.GetToSequence()})
		case *feedv1.SessionEvent_Ended:
			v.ended = x.Ended.GetReason()
		}
	}
}

// readSession reads t until it delivered want messages past from (or
// ended), failing after a minute.
func readSession(tb testing.TB, t *feed.SessionTail, v *sessionView, want int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(v.seqs) < want && v.ended == 0 {
		evs, err := t.Next(ctx)
		if err != nil {
			tb.Fatalf("Next after %d messages: %v", len(v.seqs), err)
		}
		v.take(evs)
	}
}

// readToEnd reads t until io.EOF.
func readToEnd(tb testing.TB, t *feed.SessionTail, v *sessionView) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		evs, err := t.Next(ctx)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			tb.Fatalf("Next: %v", err)
		}
		v.take(evs)
	}
}

// dense fails unless seqs is from, from+1, ..., from+n-1.
func dense(tb testing.TB, seqs []int64, from int64, n int) {
	tb.Helper()
	if len(seqs) != n {
		tb.Fatalf("%d messages delivered, want %d: %v", len(seqs), n, seqs)
	}
	for i, s := range seqs {
		if s != from+int64(i) {
			tb.Fatalf("message %d has sequence %d, want %d (all: %v)", i, s, from+int64(i), seqs)
		}
	}
}
