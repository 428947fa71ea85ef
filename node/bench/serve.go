package bench

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"time"
)

// serveReadyTimeout bounds the wait for a served node to serve.
const serveReadyTimeout = time.Minute

// startServed starts cfg.Serve with a fresh database under dir on a loopback
// port from pick and waits until it serves there. A node that exits first
// (its port taken in between) is started again on a fresh port, startTries
// times in all. On SQLite the retry opens the database the failed start
// created: migrated, and as empty as a fresh one.
func startServed(ctx context.Context, cfg Config, dir string, pick portPicker) (*servedNode, error) {
	for try := 1; ; try++ {
		s, err := startServedOnce(ctx, cfg, dir, pick)
		if err == nil || !errors.Is(err, errExitedEarly) || try == startTries {
			return s, err
		}
	}
}

func startServedOnce(ctx context.Context, cfg Config, dir string, pick portPicker) (*servedNode, error) {
	port, err := pick()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	argv := append([]string(nil), cfg.Serve...)
	if cfg.Postgres == "" { // on PostgreSQL, Serve names the run's database
		argv = append(argv, "--data", filepath.Join(dir, "served.db"), "--synchronous", cfg.Synchronous)
	}
	argv = append(argv, "--grpc-addr", addr, "--http-addr", "")
	argv = append(argv, cfg.ServeArgs...)
	if cfg.IdleTimeout != 0 {
		argv = append(argv, "--idle-timeout", cfg.IdleTimeout.String())
	}
	s, err := startProcess(argv, addr)
	if err != nil {
		return nil, err
	}
	if err := s.waitServing(ctx, serveReadyTimeout); err != nil {
		s.kill()
		return nil, err
	}
	return s, nil
}

// freePort is a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
