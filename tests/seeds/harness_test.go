package seeds_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/session"
	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

// Stress sizes shared by both implementations of every test.
const (
	workers = 64 // goroutines hammering one key, as in each seed's race
)

// together runs fn(0..n-1) on n goroutines released at once by a barrier
// (every goroutine is parked on the start channel before it is closed), and
// waits for all of them.
func together(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newActorSystem returns a quiet actor system that is shut down when the
// test ends (after every cleanup registered later has run).
func newActorSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quietLogger() }))
	t.Cleanup(sys.Shutdown)
	return sys
}

var bg = context.Background()

// node is the part of agentstate a seed test needs, on a fresh database
// file (WAL, synchronous=FULL: the production default).
type node struct {
	store *sqlite.Store
	wr    *writer.Writer
	audit *audit.Service
	sys   *actor.ActorSystem
}

// startNode opens a fresh store and starts the writer and the audit
// service on it. Cleanup
// stops the services, then the actor system, then closes the store.
func startNode(t *testing.T, obs writer.Observer) *node {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "agentstate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Error(err)
		}
	})
	sys := newActorSystem(t)
	w, err := writer.Start(sys, store, writer.Config{Logger: quietLogger(), Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Stop(bg); err != nil {
			t.Error(err)
		}
	})
	a, err := audit.Start(sys, w, store.Reader(), audit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &node{store: store, wr: w, audit: a, sys: sys}
}

// startSessions starts the sessions service on n; it stops before the
// writer does.
func (n *node) startSessions(t *testing.T) *session.Service {
	t.Helper()
	s, err := session.Start(n.sys, n.wr, n.store.Reader(), session.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(bg); err != nil {
			t.Error(err)
		}
	})
	return s
}

// startPlans starts the plans service on n; it stops before the audit
// actor does.
func (n *node) startPlans(t *testing.T) *plan.Service {
	t.Helper()
	p, err := plan.Start(n.sys, n.wr, n.store.Reader(), plan.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(bg); err != nil {
			t.Error(err)
		}
	})
	return p
}
