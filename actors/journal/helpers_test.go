package journal_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/journal"
	"github.com/agentstate/agentstate/actors/writer"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/client"
	"github.com/agentstate/agentstate/node/codec"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/postgres"
	"github.com/agentstate/agentstate/persistence/postgres/pgtest"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testNode is agentstate's actors on one store, in an actor system of
// their own, stopped (in dependency order) when the test ends.
type testNode struct {
	sys  *actor.ActorSystem
	node *actors.Node
}

func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
}

func startOn(tb testing.TB, store persistence.Store) *testNode {
	tb.Helper()
	sys := newSystem()
	node, err := actors.Start(sys, store, actors.Config{Writer: writer.Config{Logger: quiet}})
	if err != nil {
		tb.Fatalf("actors.Start: %v", err)
	}
	tb.Cleanup(func() {
		if err := node.Stop(context.Background()); err != nil {
			tb.Errorf("node.Stop: %v", err)
		}
		sys.Shutdown()
	})
	return &testNode{sys: sys, node: node}
}

// startSQLite runs the node on a fresh SQLite file (WAL, synchronous=FULL).
func startSQLite(tb testing.TB) *testNode {
	tb.Helper()
	store, err := sqlite.Open(filepath.Join(tb.TempDir(), "journal.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	return startOn(tb, store)
}

// startPostgres runs the node on a fresh schema of the server named by
// AGENTSTATE_TEST_POSTGRES; without it the test is skipped, and fails under
// CI, as the other PostgreSQL tests do.
func startPostgres(tb testing.TB) *testNode {
	tb.Helper()
	ctx := context.Background()
	dsn := pgtest.Schema(tb, "journal_")
	store, err := postgres.Open(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	return startOn(tb, store)
}

// mustPanic runs f and returns the *journal.Error it panicked with; the
// test fails if it did not panic with one.
func mustPanic(t *testing.T, f func()) (perr error) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("expected a panic, got none")
		}
		err, ok := r.(error)
		if !ok {
			t.Fatalf("panicked with %T (%v), want an error", r, r)
		}
		perr = err
	}()
	f()
	return nil
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// overGRPC serves n's sessions over gRPC on an in-memory listener, as the
// node does (its codec forced on both ends), and returns them as a
// client's.
func overGRPC(t *testing.T, n *testNode) journal.Sessions {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.ForceServerCodecV2(codec.Codec()))
	sessionv1.RegisterSessionServiceServer(srv, n.node.Sessions())
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	opts := append(client.DialOptions(client.Options{}),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	conn, err := grpc.NewClient("passthrough:///bufnet", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	return journal.OverGRPC(sessionv1.NewSessionServiceClient(conn))
}
