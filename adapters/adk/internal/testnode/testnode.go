// Package testnode starts agentstate for the tests of the ADK backends
// (every ADK version's): embedded in the test's process, or as a networked
// node in it that the tests reach over gRPC on loopback.
package testnode

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/client"
	"github.com/agentstate/agentstate/node/server"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// QuietLogger is an actor system logger factory that logs nothing.
func QuietLogger(*actor.ActorSystem) *slog.Logger { return quiet }

// Embedded is agentstate in this process: an actor system and the actors
// on a SQLite file; Node.Sessions() is the store an ADK service takes.
type Embedded struct {
	Sys   *actor.ActorSystem
	Store *sqlite.Store
	Node  *actors.Node
}

// OpenEmbedded starts agentstate on the SQLite file path; stop is
// idempotent and also runs at the test's end.
func OpenEmbedded(t testing.TB, path string) (e *Embedded, stop func()) {
	t.Helper()
	e = &Embedded{Sys: actor.NewActorSystem(actor.WithLoggerFactory(QuietLogger))}
	var err error
	if e.Store, err = sqlite.Open(path); err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	if e.Node, err = actors.Start(e.Sys, e.Store, actors.Config{}); err != nil {
		e.Store.Close()
		t.Fatalf("actors.Start: %v", err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Node.Stop(ctx); err != nil {
			t.Errorf("node Stop: %v", err)
		}
		e.Store.Close()
		e.Sys.Shutdown()
	}
	t.Cleanup(stop)
	return e, stop
}

// Start starts a networked node in this process on the SQLite file path,
// and returns its gRPC sessions API; stop is idempotent and also runs at
// the test's end.
func Start(t testing.TB, path string) (api sessionv1.SessionServiceClient, stop func()) {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Data = path
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", ""
	cfg.ShutdownTimeout = 10 * time.Second
	log, err := server.NewLogger(io.Discard, "text", "error")
	if err != nil {
		t.Fatal(err)
	}
	n, err := server.Start(cfg, log)
	if err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	conn, err := client.Dial(n.GRPCAddr(), client.Options{})
	if err != nil {
		n.Shutdown()
		t.Fatalf("dial: %v", err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		if err := n.Shutdown(); err != nil {
			t.Errorf("node Shutdown: %v", err)
		}
	}
	t.Cleanup(stop)
	return sessionv1.NewSessionServiceClient(conn), stop
}

// DBPath is a SQLite file in the test's temporary directory.
func DBPath(t testing.TB) string { return filepath.Join(t.TempDir(), "agentstate.db") }
