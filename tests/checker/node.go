package checker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	nodeclient "github.com/agentstate/agentstate/node/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// BuildNode compiles the module's ./cmd/node into out. The module is the
// one `go env GOMOD` names from the current directory, so it works from
// any package directory of the repository.
func BuildNode(ctx context.Context, out string, race bool) error {
	gobin, err := goTool()
	if err != nil {
		return err
	}
	gomod, err := exec.CommandContext(ctx, gobin, "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("checker: go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, gobin, append(args, "./cmd/node")...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("checker: go build ./cmd/node: %w\n%s", err, b)
	}
	return nil
}

func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go"), nil
	}
	return "", errors.New("checker: no go tool on PATH")
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago. Another process may take it in between; Start then fails loudly.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// NodeConfig says how to run `node serve`.
type NodeConfig struct {
	Binary string
	Dir    string   // holds the database (Dir/agentstate.db) and the node's log
	Args   []string // more serve flags
	// ReadyTimeout bounds how long a start may take to answer /readyz [60s].
	ReadyTimeout time.Duration
}

// Node is one `node serve` subprocess that can be killed and restarted on
// the same database and addresses. Its methods are not safe for
// concurrent use; the test's controlling goroutine owns it.
//
// Invariant: cmd is non-nil exactly while a started process has not been
// reaped; exited is closed when it has been.
type Node struct {
	cfg      NodeConfig
	DB       string
	GRPCAddr string
	HTTPAddr string
	log      *os.File // every start's output, appended
	cmd      *exec.Cmd
	exited   chan struct{}
	waitErr  error
	starts   int
}

// StartNode picks free addresses and starts the node; it returns once the
// node answers /readyz with 200. A port taken by another process between
// FreeAddr and the node's bind makes the node exit; StartNode then tries
// again with fresh ports (three times in all).
func StartNode(ctx context.Context, cfg NodeConfig) (*Node, error) {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 60 * time.Second
	}
	log, err := os.Create(filepath.Join(cfg.Dir, "node.log"))
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, DB: filepath.Join(cfg.Dir, "agentstate.db"), log: log}
	for try := 1; ; try++ {
		if n.GRPCAddr, err = FreeAddr(); err != nil {
			break
		}
		if n.HTTPAddr, err = FreeAddr(); err != nil {
			break
		}
		if err = n.Start(ctx); err == nil || !errors.Is(err, errExitedEarly) || try == 3 {
			break
		}
	}
	if err != nil {
		log.Close()
		return nil, err
	}
	return n, nil
}

// errExitedEarly: the process ended before it was ready.
var errExitedEarly = errors.New("checker: node exited before ready")

// Start starts the process (again) with the node's database and addresses,
// plus extra flags, and waits for /readyz.
func (n *Node) Start(ctx context.Context, extra ...string) error {
	if n.cmd != nil {
		return errors.New("checker: node already running")
	}
	n.starts++
	fmt.Fprintf(n.log, "\n=== checker: start %d at %s\n", n.starts, time.Now().Format(time.RFC3339Nano))
	args := append([]string{"serve", "--data", n.DB, "--grpc-addr", n.GRPCAddr, "--http-addr", n.HTTPAddr}, n.cfg.Args...)
	cmd := exec.Command(n.cfg.Binary, append(args, extra...)...)
	cmd.Dir = n.cfg.Dir
	cmd.Env = nodeEnv()
	// A wrapper, not the *os.File itself: the child then writes into a
	// pipe, which no file-size limit applied to the node can truncate.
	cmd.Stdout = struct{ io.Writer }{n.log}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("checker: start node: %w", err)
	}
	n.cmd = cmd
	n.exited = make(chan struct{})
	go func() {
		n.waitErr = cmd.Wait()
		close(n.exited)
	}()
	if err := n.waitReady(ctx); err != nil {
		_ = n.Kill()
		return fmt.Errorf("%w\n--- node log (tail) ---\n%s", err, n.LogTail(4000))
	}
	return nil
}

// nodeEnv is the test's environment without AGENTSTATE_* settings, which
// would otherwise override the flags.
func nodeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTSTATE_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitReady polls /readyz until it answers 200, the process exits, or the
// ready timeout passes.
func (n *Node) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ReadyTimeout)
	defer cancel()
	url := "http://" + n.HTTPAddr + "/readyz"
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-n.exited:
			return fmt.Errorf("%w: %v", errExitedEarly, n.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("checker: node not ready at %s: %w", url, ctx.Err())
		case <-tick.C:
		}
	}
}

// PID is the running process's id (0 when none runs).
func (n *Node) PID() int {
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Kill sends SIGKILL and waits until the process is reaped: afterwards no
// write of it can still reach the database.
func (n *Node) Kill() error {
	if n.cmd == nil {
		return nil
	}
	err := n.cmd.Process.Kill()
	<-n.exited
	n.cmd = nil
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// Stop sends SIGTERM and waits up to timeout for a clean exit (status 0);
// past the timeout it kills the process and says so.
func (n *Node) Stop(timeout time.Duration) error {
	if n.cmd == nil {
		return nil
	}
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-n.exited:
		n.cmd = nil
		if n.waitErr != nil {
			return fmt.Errorf("checker: node exited uncleanly: %w", n.waitErr)
		}
		return nil
	case <-t.C:
		_ = n.Kill()
		return fmt.Errorf("checker: node did not stop within %v; killed", timeout)
	}
}

// Close kills the node if it still runs and closes its log.
func (n *Node) Close() error {
	err := n.Kill()
	return errors.Join(err, n.log.Close())
}

// LogTail returns the last max bytes of everything the node printed.
func (n *Node) LogTail(max int) string {
	b, err := os.ReadFile(n.log.Name())
	if err != nil {
		return err.Error()
	}
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// RaceReports counts the race detector's reports in the node's output
// (non-zero only for a node built with -race).
func (n *Node) RaceReports() int {
	b, _ := os.ReadFile(n.log.Name())
	return bytes.Count(b, []byte("WARNING: DATA RACE"))
}

// Dial opens a client connection to the node. It reconnects quickly after
// a restart: the gRPC default backoff (up to 2 minutes) would stall a
// crash loop. Its unary writes report a connection lost after the send as
// OUTCOME_UNKNOWN, not UNAVAILABLE (nodeclient.OutcomeOptions, part of
// nodeclient.DialOptions).
func (n *Node) Dial() (*grpc.ClientConn, error) { return n.DialAs("") }

// DialAs is Dial presenting token (a principal's bearer credential; ""
// none).
func (n *Node) DialAs(token string) (*grpc.ClientConn, error) {
	return n.DialWith(nodeclient.Options{Token: token})
}

// DialWith is Dial with o's credentials (TLS, a client certificate, a
// token).
func (n *Node) DialWith(o nodeclient.Options) (*grpc.ClientConn, error) {
	return nodeclient.Dial(n.GRPCAddr, o,
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 300 * time.Millisecond},
			MinConnectTimeout: 2 * time.Second,
		}))
}
