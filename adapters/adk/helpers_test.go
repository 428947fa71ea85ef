package adk_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/adapters/adk"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/client"
	"github.com/agentstate/agentstate/node/server"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func quietLogger(*actor.ActorSystem) *slog.Logger { return quiet }

// embedded is agentstate in this process: an actor system, the actors on a
// SQLite file, and the ADK service over the sessions service.
type embedded struct {
	sys   *actor.ActorSystem
	store *sqlite.Store
	node  *actors.Node
	Svc   *adk.Service
}

// openEmbedded starts agentstate on the SQLite file path; stop is
// idempotent and also runs at the test's end.
func openEmbedded(t testing.TB, path string) (e *embedded, stop func()) {
	t.Helper()
	e = &embedded{sys: actor.NewActorSystem(actor.WithLoggerFactory(quietLogger))}
	var err error
	if e.store, err = sqlite.Open(path); err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	if e.node, err = actors.Start(e.sys, e.store, actors.Config{}); err != nil {
		e.store.Close()
		t.Fatalf("actors.Start: %v", err)
	}
	e.Svc = adk.New(e.node.Sessions(), adk.Options{})
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.node.Stop(ctx); err != nil {
			t.Errorf("node Stop: %v", err)
		}
		e.store.Close()
		e.sys.Shutdown()
	}
	t.Cleanup(stop)
	return e, stop
}

// startNode starts a networked node in this process on the SQLite file
// path, and returns the ADK service over gRPC to it and the raw API.
func startNode(t testing.TB, path string) (svc *adk.Service, api sessionv1.SessionServiceClient, stop func()) {
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
	api = sessionv1.NewSessionServiceClient(conn)
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
	return adk.New(adk.Remote(api), adk.Options{}), api, stop
}

func dbPath(t testing.TB) string { return filepath.Join(t.TempDir(), "agentstate.db") }
