package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// startTimeout bounds how long a node may take to print "serving"; a
// -race build opening a fresh database on a busy machine is slow.
const startTimeout = 90 * time.Second

// nodeProc is one `node serve` child process.
type nodeProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	dir     string
	db      string
	addrs   map[string]string // grpc_addr, http_addr, remote_addr from the "serving" log line
	exited  chan struct{}     // closed when the process has exited; then waitErr is set
	waitErr error

	mu   sync.Mutex
	logs []string
}

// cleanEnv is the test's environment without AGENTSTATE_* variables, so
// a developer's settings cannot change what a test runs.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTSTATE_") {
			env = append(env, kv)
		}
	}
	return env
}

// startNode runs `node serve` on a fresh directory with free ports and
// waits for its "serving" log line, which carries the bound addresses. No
// polling: the line is read from the node's stderr as it is written.
func startNode(t *testing.T, extra ...string) *nodeProc {
	t.Helper()
	return startNodeOn(t, t.TempDir(), extra...)
}

// startNodeOn is startNode on the database under dir (kept from an
// earlier node).
func startNodeOn(t *testing.T, dir string, extra ...string) *nodeProc {
	t.Helper()
	binaries(t)
	return startNodeExec(t, nodeBin, nil, dir, extra...)
}

// startNodeExec is startNodeOn running bin, with env added to the
// (cleaned) environment: cliBin measures memory without the race
// detector's shadow memory.
func startNodeExec(t *testing.T, bin string, env []string, dir string, extra ...string) *nodeProc {
	t.Helper()
	n := &nodeProc{t: t, dir: dir, db: filepath.Join(dir, "data", "agentstate.db"), exited: make(chan struct{})}
	args := append([]string{"serve", "--data", n.db, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--log-format", "json"}, extra...)
	n.cmd = exec.Command(bin, args...)
	n.cmd.Env = append(cleanEnv(), env...)
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	n.cmd.Stdout = io.Discard
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	serving := make(chan map[string]string, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			n.mu.Lock()
			n.logs = append(n.logs, line)
			n.mu.Unlock()
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "serving" {
				addrs := map[string]string{}
				for k, v := range rec {
					if s, ok := v.(string); ok && strings.HasSuffix(k, "_addr") {
						addrs[k] = s
					}
				}
				serving <- addrs
			}
		}
	}()
	go func() {
		<-readDone // Wait closes the pipe; read everything first
		n.waitErr = n.cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-n.exited:
		default:
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
		if t.Failed() {
			t.Logf("node logs:\n%s", n.logText())
		}
	})
	select {
	case n.addrs = <-serving:
	case <-n.exited:
		t.Fatalf("node exited before serving: %v\n%s", n.waitErr, n.logText())
	case <-time.After(startTimeout):
		t.Fatalf("node did not serve within %v\n%s", startTimeout, n.logText())
	}
	return n
}

func (n *nodeProc) logText() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.logs, "\n")
}

func (n *nodeProc) grpcAddr() string { return n.addrs["grpc_addr"] }

// alive reports whether the process is still running.
func (n *nodeProc) alive() bool {
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// terminate sends SIGTERM and returns the exit code.
func (n *nodeProc) terminate(timeout time.Duration) int {
	n.t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		n.t.Fatalf("SIGTERM: %v", err)
	}
	return n.waitExit(timeout)
}

func (n *nodeProc) waitExit(timeout time.Duration) int {
	n.t.Helper()
	select {
	case <-n.exited:
	case <-time.After(timeout):
		n.t.Fatalf("node did not exit within %v after SIGTERM\n%s", timeout, n.logText())
	}
	var ee *exec.ExitError
	if errors.As(n.waitErr, &ee) {
		return ee.ExitCode()
	}
	if n.waitErr != nil {
		n.t.Fatalf("wait: %v", n.waitErr)
	}
	return 0
}

// conn is a plaintext gRPC client connection to the node.
func (n *nodeProc) conn() *grpc.ClientConn {
	n.t.Helper()
	c, err := grpc.NewClient(n.grpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { c.Close() })
	return c
}

// httpGet fetches path from the node's HTTP server.
func (n *nodeProc) httpGet(path string) (int, string) {
	n.t.Helper()
	resp, err := http.Get("http://" + n.addrs["http_addr"] + path)
	if err != nil {
		n.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// cliResult is one run of a client command.
type cliResult struct {
	args           []string
	stdout, stderr string
	code           int
}

// cli runs `node <args> --addr <node>` (plus conn flags) and returns what
// it printed and its exit code.
func (n *nodeProc) cli(conn []string, args ...string) cliResult {
	n.t.Helper()
	full := append(append(append([]string{}, args...), "--addr", n.grpcAddr()), conn...)
	return runCLI(n.t, nil, full...)
}

// runCLI runs the node binary with args; env is added to the (cleaned)
// environment.
func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBin, args...)
	cmd.Env = append(cleanEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{args: args, stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run node %v: %v", args, err)
	}
	return r
}

// ok fails the test unless the command succeeded, and decodes its output
// lines into msgs (one line per message, in order).
func (r cliResult) ok(t *testing.T, msgs ...proto.Message) cliResult {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("node %v: exit %d\nstdout: %s\nstderr: %s", r.args, r.code, r.stdout, r.stderr)
	}
	lines := r.lines()
	if len(lines) < len(msgs) {
		t.Fatalf("node %v printed %d lines, want at least %d:\n%s", r.args, len(lines), len(msgs), r.stdout)
	}
	for i, m := range msgs {
		if err := protojson.Unmarshal([]byte(lines[i]), m); err != nil {
			t.Fatalf("node %v line %d is not a %T: %v\n%s", r.args, i, m, err, lines[i])
		}
	}
	return r
}

func (r cliResult) lines() []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// fails checks the command failed with exit status code and printed an
// error object naming errCode on stderr.
func (r cliResult) fails(t *testing.T, code int, errCode string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("node %v: exit %d, want %d\nstdout: %s\nstderr: %s", r.args, r.code, code, r.stdout, r.stderr)
	}
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stderr)), &body); err != nil || body.Error.Code != errCode || body.Error.Message == "" {
		t.Fatalf("node %v: stderr %q, want {\"error\":{\"code\":%q,...}}", r.args, r.stderr, errCode)
	}
}
