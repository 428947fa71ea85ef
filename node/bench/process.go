package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// errExitedEarly: a started node ended before it served, as one does
// whose port another process took between freePort and the node's bind.
var errExitedEarly = errors.New("bench: node exited before serving")

// startTries is how many starts, each on fresh ports, a served node (or a
// cluster's whole set of members) gets: a port freePort found was only
// free a moment ago, and other processes (tests running nodes in
// parallel) may take it before the node binds it.
const startTries = 3

// portPicker returns a loopback port to start a node on (freePort; tests
// hand out taken ones).
type portPicker func() (int, error)

// servedNode is a `node serve` process this run started: for a gRPC mode,
// the node in a process of its own, as it is deployed, so that the
// client's and the node's CPU are not mixed up and neither steals the
// other's scheduler; or a member of a cluster run.
//
// Invariant: one goroutine calls cmd.Wait, once; exited is closed when it
// returned, and waitErr and the log's last line are read only after.
type servedNode struct {
	cmd     *exec.Cmd
	addr    string
	log     *serveLog
	exited  chan struct{}
	waitErr error
}

// startProcess starts argv, a `node serve` command line with its gRPC API on
// addr. The log flags go last so that they win over any the caller
// added: its serving line, at INFO in the text format, is the readiness
// signal (waitServing).
func startProcess(argv []string, addr string) (*servedNode, error) {
	args := append(slices.Clip(argv[1:]), "--log-level", "info", "--log-format", "text")
	cmd := exec.Command(argv[0], args...)
	s := &servedNode{cmd: cmd, addr: addr, exited: make(chan struct{}),
		log: &serveLog{addr: addr, out: os.Stderr, serving: make(chan struct{})}}
	// One writer for both: exec then copies both through one pipe, so
	// Write is never called concurrently.
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", argv[0], err)
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

// serving reports whether the node said it serves on its address.
func (s *servedNode) serving() bool {
	select {
	case <-s.log.serving:
		return true
	default:
		return false
	}
}

// exitErr is nil while the process runs, else errExitedEarly with how it
// ended.
func (s *servedNode) exitErr() error {
	select {
	case <-s.exited:
		return fmt.Errorf("%w (%v; its last line: %q)", errExitedEarly, s.waitErr, s.log.last)
	default:
		return nil
	}
}

// waitServing waits until the node logs that it serves gRPC on its
// address (it has bound every listener then), it exits, ctx ends or
// timeout passes. A dial alone could not tell: another process may hold
// the port, and then answers it.
func (s *servedNode) waitServing(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.log.serving:
		return nil
	case <-s.exited:
		return s.exitErr()
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("bench: node did not serve on %s within %s", s.addr, timeout)
	}
}

// cpu is the node's CPU time so far.
func (s *servedNode) cpu() time.Duration { return childCPU(s.cmd.Process.Pid) }

// stop drains the node as an operator would (SIGTERM) and waits for it;
// one that already exited is only waited for.
func (s *servedNode) stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return s.wait()
}

// wait waits for the node to exit, killing it after stopTimeout.
func (s *servedNode) wait() error {
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-s.exited:
		return s.waitErr
	case <-t.C:
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("bench: node did not stop within %s: %w", stopTimeout, s.waitErr)
	}
}

// kill ends a node whose start failed and waits until it is reaped, so
// that a retry never overlaps it.
func (s *servedNode) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// serveLog is a served node's output. It passes it on to out but for
// INFO and DEBUG records (the node runs at INFO for the serving line
// alone), and closes serving at the line saying the node serves gRPC on
// addr: only the process that bound addr writes it.
type serveLog struct {
	addr    string
	out     io.Writer
	serving chan struct{}
	seen    bool
	buf     []byte
	last    string // the last line passed on
}

func (l *serveLog) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.line(l.buf[:i+1])
		l.buf = l.buf[i+1:]
	}
}

func (l *serveLog) line(b []byte) {
	f := strings.Fields(string(b))
	if !slices.Contains(f, "level=INFO") && !slices.Contains(f, "level=DEBUG") {
		l.last = strings.TrimSpace(string(b))
		_, _ = l.out.Write(b)
		return
	}
	if !l.seen && slices.Contains(f, "msg=serving") && slices.Contains(f, "grpc_addr="+l.addr) {
		l.seen = true
		close(l.serving)
	}
}
