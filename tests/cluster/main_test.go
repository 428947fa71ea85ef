package cluster_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	nodeclient "github.com/agentstate/agentstate/node/client"
	"github.com/agentstate/agentstate/persistence/postgres/pgtest"
	"github.com/agentstate/agentstate/tests/checker"
	"google.golang.org/grpc"
)

// Sizes. The defaults are the CI run; docs/OPERATIONS.md has the long run.
var (
	flagKills     = flag.Int("kills", 10, "SIGKILLs of random members in TestClusterCrashLoop")
	flagSessions  = flag.Int("sessions", 16, "sessions the load appends to")
	flagClients   = flag.Int("clients", 9, "concurrent load clients, spread over the members")
	flagPlans     = flag.Int("plans", 4, "plans the load records errors for")
	flagEtcdKills = flag.Int("etcd-kills", 1, "SIGKILLs (each followed by a replacement) in TestClusterEtcdMembership")
	flagProgress  = flag.Int("progress", 40, "operations acknowledged after each restart before the next kill")
	flagMaxDelay  = flag.Duration("max-delay", 500*time.Millisecond, "longest random delay before a kill")
	flagSeed      = flag.Uint64("seed", 0, "seed for kill choices and load (0: from the clock; printed)")
	// Three -race nodes plus a -race test binary do not fit the CI budget on
	// two cores; the single-node checker runs its node under -race.
	flagNodeRace = flag.String("node-race", "off", "build the node with -race: on, off, or auto (as this test binary)")
	flagNode     = flag.String("node", "", "use this node binary instead of building ./cmd/node")
	flagKeep     = flag.String("keep", "", "keep each member's log in a new directory under this one")
)

var build checker.NodeBuild

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	build.Remove()
	os.Exit(code)
}

// database creates a database of its own for the test on the server of
// AGENTSTATE_TEST_POSTGRES and returns its DSN; it is dropped when the test
// ends. Without a server the test skips, or fails when CI is set.
func database(t *testing.T) string {
	t.Helper()
	return pgtest.Database(t, "agentstate_cluster_")
}

// nodeBinary builds ./cmd/node once per test binary.
func nodeBinary(t *testing.T) string {
	t.Helper()
	return build.Path(t, *flagNode, *flagNodeRace, raceEnabled)
}

func seed(t *testing.T) uint64 { return checker.Seed(t, *flagSeed) }

// runContext ends a little before the test binary's deadline, so a stuck
// run fails with the members' logs rather than a panic dump.
func runContext(t *testing.T) context.Context {
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		t.Cleanup(cancel)
	}
	return ctx
}

// member is one running `node serve --cluster` process and a connection
// to its gRPC port.
type member struct {
	*checker.Node
	conn *grpc.ClientConn
	// amAddr is the member's automanaged host:port (its /_health).
	amAddr string
}

// startCluster starts one member per entry of names (members with the same
// cluster name form one cluster, with each other as peers), all on the
// database dsn, concurrently: a member is ready only once every peer
// joined. Members and connections are closed when the test ends, and a
// failing test prints each member's log tail.
func startCluster(t *testing.T, ctx context.Context, dsn string, names ...string) []*member {
	t.Helper()
	return startClusterArgs(t, ctx, dsn, nil, names...)
}

// startClusterArgs is startCluster with extra flags for every member (a
// later flag wins over an earlier one).
func startClusterArgs(t *testing.T, ctx context.Context, dsn string, extra []string, names ...string) []*member {
	t.Helper()
	amPorts := make([]string, len(names))
	amAddrs := make([]string, len(names))
	peers := map[string][]string{}
	for i, name := range names {
		addr, err := checker.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, amPorts[i], _ = net.SplitHostPort(addr)
		amAddrs[i] = addr
		peers[name] = append(peers[name], addr)
	}
	args := make([][]string, len(names))
	for i, name := range names {
		args[i] = append([]string{
			"--data", dsn, // overrides the checker's SQLite default (the later flag wins)
			"--cluster", name, "--peers", strings.Join(peers[name], ","), "--am-port", amPorts[i],
			"--log-level", "warn",
			// Members on one machine, without certificates: the remote
			// refuses plaintext anywhere but on loopback, and only with
			// this flag (startClusterArgs' extra may give mutual TLS).
			"--insecure-remote-plaintext-loopback",
		}, extra...)
	}
	members := startMembers(t, ctx, args)
	for i, m := range members {
		m.amAddr = amAddrs[i]
	}
	return members
}

// startMembers starts one `node serve` per entry of args (its flags),
// concurrently, and returns them once each answers /readyz, with a
// connection to each. They are closed when the test ends, and a failing
// test prints each one's log tail.
func startMembers(t *testing.T, ctx context.Context, args [][]string) []*member {
	t.Helper()
	return startMembersWith(t, ctx, nodeclient.Options{}, args)
}

// startMembersWith is startMembers whose connections are dialled with o
// (TLS, a principal's credential).
func startMembersWith(t *testing.T, ctx context.Context, o nodeclient.Options, args [][]string) []*member {
	t.Helper()
	bin := nodeBinary(t)
	members := make([]*member, len(args))
	errs := make([]error, len(args))
	var wg sync.WaitGroup
	for i := range args {
		dir := t.TempDir()
		if *flagKeep != "" {
			var err error
			if dir, err = os.MkdirTemp(*flagKeep, fmt.Sprintf("%s-%d-", t.Name(), i)); err != nil {
				t.Fatal(err)
			}
			t.Logf("member %d log kept in %s", i, dir)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := checker.StartNode(ctx, checker.NodeConfig{Binary: bin, Dir: dir, Args: args[i]})
			if err != nil {
				errs[i] = fmt.Errorf("member %d: %w", i, err)
				return
			}
			members[i] = &member{Node: n}
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for i, m := range members {
			if m == nil {
				continue
			}
			if m.conn != nil {
				m.conn.Close()
			}
			if t.Failed() {
				t.Logf("--- member %d log (tail) ---\n%s", i, m.LogTail(3000))
			}
			m.Close()
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range members {
		var err error
		if m.conn, err = m.DialWith(o); err != nil {
			t.Fatal(err)
		}
	}
	return members
}

func conns(ms []*member) []grpc.ClientConnInterface {
	var out []grpc.ClientConnInterface
	for _, m := range ms {
		out = append(out, m.conn)
	}
	return out
}
