package bench

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// fakeServeEnv makes this test binary a stand-in for `node serve`
// (fakeServe): the start and retry logic is under test, not the node.
const fakeServeEnv = "AGENTSTATE_TEST_BENCH_FAKE_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeServeEnv) == "1" {
		os.Exit(fakeServe(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeServe binds what `node serve` would of --grpc-addr, --http-addr
// (answering /readyz) and --am-port, exits 1 as the node does when one is
// taken, else logs the node's serving line and runs until SIGTERM.
func fakeServe(args []string) int {
	flag := map[string]string{}
	for i := 0; i+1 < len(args); i++ {
		flag[args[i]] = args[i+1]
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	listen := func(addr string) net.Listener {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake serve:", err)
			os.Exit(1)
		}
		return l
	}
	g := listen(flag["--grpc-addr"])
	if h := flag["--http-addr"]; h != "" {
		go http.Serve(listen(h), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	}
	if p := flag["--am-port"]; p != "" {
		listen(net.JoinHostPort("127.0.0.1", p))
	}
	slog.New(slog.NewTextHandler(os.Stderr, nil)).Info("serving", "grpc_addr", g.Addr().String())
	<-stop
	return 0
}

// picker hands out the taken ports first, then free ones, and counts.
type picker struct {
	mu    sync.Mutex
	taken []int
	calls int
}

func (p *picker) pick() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if len(p.taken) > 0 {
		port := p.taken[0]
		p.taken = p.taken[1:]
		return port, nil
	}
	return freePort()
}

// occupied is a port another process's node answers on (here this
// process's): a dial connects and /readyz answers 200.
func occupied(t *testing.T) (int, string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().(*net.TCPAddr)
	return addr.Port, addr.String()
}

// A served node whose port another process took before it bound exits;
// it is started again on a fresh port, and not mistaken for the process
// that answers on the taken one.
func TestStartServedRetriesTakenPort(t *testing.T) {
	t.Setenv(fakeServeEnv, "1")
	port, taken := occupied(t)
	p := &picker{taken: []int{port}}
	cfg := Config{Serve: []string{os.Args[0], "serve"}, Synchronous: "normal"}
	s, err := startServed(t.Context(), cfg, t.TempDir(), p.pick)
	if err != nil {
		t.Fatal(err)
	}
	// Only the first pick is taken; a free one another process took since
	// is retried too, and is why more than 2 tries is not an error.
	if s.addr == taken || p.calls < 2 {
		t.Errorf("served at %s (the taken port is %s) after %d tries, want a retry elsewhere", s.addr, taken, p.calls)
	}
	if err := s.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// A node that cannot bind on any try fails after startTries of them, with
// its exit as the reason.
func TestStartServedGivesUp(t *testing.T) {
	t.Setenv(fakeServeEnv, "1")
	port, _ := occupied(t)
	p := &picker{taken: []int{port, port, port, port}}
	cfg := Config{Serve: []string{os.Args[0], "serve"}, Synchronous: "normal"}
	_, err := startServed(t.Context(), cfg, t.TempDir(), p.pick)
	if !errors.Is(err, errExitedEarly) || p.calls != startTries {
		t.Fatalf("err = %v after %d tries, want errExitedEarly after %d", err, p.calls, startTries)
	}
}

// A cluster member whose HTTP port another node holds exits; every member
// is stopped and the whole set started again on fresh ports, and no
// member is taken to be ready on the other node's /readyz.
func TestStartMembersRetriesTakenPort(t *testing.T) {
	t.Setenv(fakeServeEnv, "1")
	port, taken := occupied(t)
	free := make([]int, 5) // two members pick am, am, grpc, http, grpc, http
	for i := range free {
		var err error
		if free[i], err = freePort(); err != nil {
			t.Fatal(err)
		}
	}
	p := &picker{taken: append(free, port)}
	cfg := ClusterConfig{Serve: []string{os.Args[0], "serve"}, Members: 2}
	members, err := startMembers(t.Context(), cfg, "postgres://nowhere.invalid/x", p.pick)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range members {
		if m.http == taken {
			t.Errorf("member %d taken as ready on the other node's %s", i, taken)
		}
		if err := m.stop(); err != nil {
			t.Errorf("stop member %d: %v", i, err)
		}
	}
	// Whole sets of 6 ports (more than 2 only if a free one was taken
	// since, as in TestStartServedRetriesTakenPort).
	if p.calls < 2*6 || p.calls%6 != 0 {
		t.Errorf("%d ports picked, want whole sets of 6, at least 2", p.calls)
	}
	for _, a := range []int{free[0], free[2]} { // the first set was stopped: its ports are free again
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(a)))
		if err != nil {
			t.Errorf("port %d of the first set still held: %v", a, err)
			continue
		}
		l.Close()
	}
}
