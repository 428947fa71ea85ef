package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// serveReadyTimeout bounds the wait for a served node to listen.
const serveReadyTimeout = time.Minute

// servedNode is a `node serve` process this run started for a gRPC mode:
// the node in a process of its own, as it is deployed, so that the
// client's and the node's CPU are not mixed up and neither steals the
// other's scheduler.
type servedNode struct {
	cmd  *exec.Cmd
	addr string
}

// startServed starts cfg.Serve with a fresh database under dir on a free
// loopback port and waits until it accepts connections.
func startServed(ctx context.Context, cfg Config, dir string) (*servedNode, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append([]string(nil), cfg.Serve[1:]...)
	if cfg.Postgres == "" { // on PostgreSQL, Serve names the run's database
		args = append(args, "--data", filepath.Join(dir, "served.db"), "--synchronous", cfg.Synchronous)
	}
	args = append(args, "--grpc-addr", addr, "--http-addr", "", "--log-level", "warn")
	args = append(args, cfg.ServeArgs...)
	if cfg.IdleTimeout != 0 {
		args = append(args, "--idle-timeout", cfg.IdleTimeout.String())
	}
	cmd := exec.Command(cfg.Serve[0], args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", cfg.Serve[0], err)
	}
	s := &servedNode{cmd: cmd, addr: addr}
	deadline := time.Now().Add(serveReadyTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return s, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, errors.Join(fmt.Errorf("bench: served node at %s not listening: %w", addr, err), s.stop())
		}
		// Polling a process we do not control for its listener: no
		// signal to wait on instead.
		time.Sleep(20 * time.Millisecond)
	}
}

// cpu is the served node's CPU time so far.
func (s *servedNode) cpu() time.Duration { return childCPU(s.cmd.Process.Pid) }

// stop drains the node as an operator would (SIGTERM) and waits for it.
func (s *servedNode) stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	return s.wait()
}

// wait waits for the node to exit, killing it after stopTimeout.
func (s *servedNode) wait() error {
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		return fmt.Errorf("bench: served node did not stop within %s: %w", stopTimeout, <-done)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
