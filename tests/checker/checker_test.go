package checker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentstate/agentstate/tests/checker"
	"google.golang.org/grpc"
)

// Sizes of the crash and fault runs. The defaults are the CI run; the
// long run is documented in docs/CHECKER.md, e.g.
//
//	go test ./tests/checker -run CrashLoop -timeout 60m -args -kills=25 -sessions=64 -clients=64
var (
	flagKills    = flag.Int("kills", 10, "SIGKILLs delivered by TestCrashLoop")
	flagSessions = flag.Int("sessions", 16, "sessions the load appends to")
	flagClients  = flag.Int("clients", 8, "concurrent load clients")
	flagPlans    = flag.Int("plans", 4, "plans the load records errors for")
	flagProgress = flag.Int("progress", 40, "operations acknowledged after each restart before the next kill")
	flagMaxDelay = flag.Duration("max-delay", 500*time.Millisecond, "longest random delay before a kill")
	flagSeed     = flag.Uint64("seed", 0, "seed for kill delays, fault size and load choices (0: from the clock; printed)")
	flagNodeRace = flag.String("node-race", "auto", "build the node with -race: on, off, or auto (as this test binary)")
	flagNode     = flag.String("node", "", "use this node binary instead of building ./cmd/node")
	flagSlack    = flag.Int64("fault-slack", 64<<10, "TestFaultRun: the database files may grow by up to this many bytes (random) before the fault bites")
	flagKeep     = flag.String("keep", "", "keep each run's database and node log in a new directory under this one")
)

var build checker.NodeBuild

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	build.Remove()
	os.Exit(code)
}

// nodeBinary builds ./cmd/node once per test binary, on first use, so the
// pure verdict tests do not pay for it.
func nodeBinary(t *testing.T) string {
	t.Helper()
	return build.Path(t, *flagNode, *flagNodeRace, raceEnabled)
}

func seed(t *testing.T) uint64 { return checker.Seed(t, *flagSeed) }

func loadConfig(s uint64) checker.LoadConfig {
	return checker.LoadConfig{Sessions: *flagSessions, Clients: *flagClients, Plans: *flagPlans, Seed: s}
}

// runContext ends a little before the test binary's deadline, so a stuck
// run fails with the node's log rather than a panic dump.
func runContext(t *testing.T) context.Context {
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		t.Cleanup(cancel)
	}
	return ctx
}

// startNode starts a node on a fresh database and a connection to it; both
// are closed when the test ends. A failing test prints the node's log.
// args are more serve flags.
func startNode(t *testing.T, ctx context.Context, args ...string) (*checker.Node, *grpc.ClientConn) {
	t.Helper()
	dir := t.TempDir()
	if *flagKeep != "" {
		var err error
		if dir, err = os.MkdirTemp(*flagKeep, t.Name()+"-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("database and node log kept in %s", dir)
	}
	n, err := checker.StartNode(ctx, checker.NodeConfig{Binary: nodeBinary(t), Dir: dir, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := n.Dial()
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		if t.Failed() {
			t.Logf("--- node log (tail) ---\n%s", n.LogTail(6000))
		}
		if races := n.RaceReports(); races > 0 {
			t.Errorf("the node printed %d data race reports:\n%s", races, n.LogTail(20000))
		}
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n, conn
}

// TestCrashLoop kills the node with SIGKILL at random moments under load,
// restarts it on the same database each time, and checks every
// acknowledged message, plan error and audit entry afterwards. The node
// authenticates: the load runs as two tenants, each a principal of its
// own namespace, and neither finds a write of the other.
func TestCrashLoop(t *testing.T) {
	ctx := runContext(t)
	s := seed(t)
	n, conn, tenants := startTenantNode(t, ctx)
	start := time.Now()
	r, err := checker.CrashLoop(ctx, n, conn, checker.CrashConfig{
		Load:     loadConfig(s),
		Kills:    *flagKills,
		Progress: *flagProgress,
		MaxDelay: *flagMaxDelay,
		Seed:     s,
		Logf:     t.Logf,
		Tenants:  tenants,
	})
	if err != nil {
		t.Fatalf("crash loop: %v (figures so far: %s)", err, r.String())
	}
	t.Logf("figures after %v: %s", time.Since(start).Round(time.Millisecond), r.String())
	if r.Kills < *flagKills {
		t.Errorf("%d kills delivered, want %d", r.Kills, *flagKills)
	}
	if r.AppendsAcked == 0 || r.BatchAcked == 0 || r.PlanErrorsAcked == 0 || r.AuditAcked == 0 || r.Replays == 0 ||
		r.KeyedAcked == 0 || r.KeyedKept == 0 || r.SuffixReplaced == 0 {
		t.Errorf("the load did not exercise every operation: %s", r.String())
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

// startTenantNode starts a node with an --auth-file: an operator (the
// read-back's connection) and two tenants, each admin of its namespace
// (where its sessions, plans and audit entries are) and of nothing else,
// with a connection each.
func startTenantNode(t *testing.T, ctx context.Context) (*checker.Node, *grpc.ClientConn, []checker.Tenant) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "identities.json")
	hash := func(tok string) string { h := sha256.Sum256([]byte(tok)); return hex.EncodeToString(h[:]) }
	file := `{"principals":[{"name":"operator","token_sha256":["` + hash("operator-token") + `"],"operator":true,"grants":[{"namespace":"*","role":"admin"}]}`
	names := []string{"tenant-a", "tenant-b"}
	for _, name := range names {
		file += `,{"name":"` + name + `","token_sha256":["` + hash(name+"-token") + `"],"grants":[{"namespace":"` + name + `","role":"admin"}]}`
	}
	if err := os.WriteFile(path, []byte(file+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	n, _ := startNode(t, ctx, "--auth-file", path)
	conn, err := n.DialAs("operator-token")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var tenants []checker.Tenant
	for _, name := range names {
		c, err := n.DialAs(name + "-token")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		tenants = append(tenants, checker.Tenant{Name: name, Namespace: name, Conn: c})
	}
	return n, conn, tenants
}

// A node that cannot start is reported with its exit, not waited on until
// the ready timeout.
func TestStartNodeReportsEarlyExit(t *testing.T) {
	start := time.Now()
	_, err := checker.StartNode(t.Context(), checker.NodeConfig{Binary: "/bin/false", Dir: t.TempDir(), ReadyTimeout: time.Minute})
	if err == nil {
		t.Fatal("StartNode of /bin/false succeeded")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("took %v to notice the exit", d)
	}
	t.Log(err)
}
