package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// stopTimeout bounds draining a measured node after its run.
const stopTimeout = time.Minute

// Run measures one mode. Each run gets fresh databases in a new directory
// under cfg.DataDir (or the system's temporary directory), removed when it
// returns.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	if isGRPC(cfg.Mode) && cfg.Addr != "" {
		return runRemote(ctx, cfg)
	}
	dir, err := os.MkdirTemp(cfg.DataDir, "agentstate-bench-*")
	if err != nil {
		return Result{}, fmt.Errorf("bench: data dir: %w", err)
	}
	defer os.RemoveAll(dir)
	if cfg.Postgres != "" {
		return runPostgres(ctx, cfg, dir)
	}
	path := filepath.Join(dir, cfg.Mode+".db")

	switch cfg.Mode {
	case ModeRaw:
		return runRaw(ctx, cfg, path, RawBatch)
	case ModeRawClosed:
		return runRaw(ctx, cfg, path, cfg.Callers)
	case ModeBaseline:
		b, err := openBaseline(ctx, path, cfg.Synchronous)
		if err != nil {
			return Result{}, err
		}
		res, err := Drive(ctx, cfg, b)
		return res, errors.Join(err, b.Close())
	case ModeInProcess:
		n, err := startNodeIdle(path, cfg.Synchronous, cfg.IdleTimeout)
		if err != nil {
			return Result{}, err
		}
		res, err := Drive(ctx, cfg, n.target())
		return res, errors.Join(err, stopNode(n))
	case ModeGRPC, ModeGRPCStream, ModeGRPCUnary:
		if len(cfg.Serve) > 0 {
			return runServed(ctx, cfg, dir)
		}
		return runLoopback(ctx, cfg, path)
	}
	return Result{}, fmt.Errorf("bench: unknown mode %q", cfg.Mode)
}

// runLoopback measures gRPC against a node this run starts on loopback.
func runLoopback(ctx context.Context, cfg Config, path string) (Result, error) {
	n, err := startNodeIdle(path, cfg.Synchronous, cfg.IdleTimeout)
	if err != nil {
		return Result{}, err
	}
	return runLoopbackNode(ctx, cfg, n)
}

// runLoopbackNode measures gRPC against n served on loopback, and stops n.
func runLoopbackNode(ctx context.Context, cfg Config, n *localNode) (Result, error) {
	srv, addr, err := loopbackServer(n)
	if err != nil {
		return Result{}, errors.Join(err, stopNode(n))
	}
	conns, err := dial(addr, cfg.Token)
	if err != nil {
		srv.Stop()
		return Result{}, errors.Join(err, stopNode(n))
	}
	api := newGRPCSessions(conns, cfg.Mode)
	res, err := Drive(ctx, cfg, &agentstate{api: api, counter: &n.commits})
	api.close()
	closeConns(conns)
	srv.GracefulStop()
	return res, errors.Join(err, stopNode(n))
}

// runServed measures gRPC against a `node serve` process started for the
// run; the CPU per append counts both processes.
func runServed(ctx context.Context, cfg Config, dir string) (Result, error) {
	s, err := startServed(ctx, cfg, dir, freePort)
	if err != nil {
		return Result{}, err
	}
	conns, err := dial(s.addr, cfg.Token)
	if err != nil {
		return Result{}, errors.Join(err, s.stop())
	}
	api := newGRPCSessions(conns, cfg.Mode)
	res, err := Drive(ctx, cfg, &agentstate{api: api, cpu: s.cpu})
	api.close()
	closeConns(conns)
	return res, errors.Join(err, s.stop())
}

// runRemote measures gRPC against the node at cfg.Addr. Its durability is
// the node's; its commits are not visible from here.
func runRemote(ctx context.Context, cfg Config) (Result, error) {
	conns, err := dial(cfg.Addr, cfg.Token)
	if err != nil {
		return Result{}, err
	}
	defer closeConns(conns)
	api := newGRPCSessions(conns, cfg.Mode)
	defer api.close()
	res, err := Drive(ctx, cfg, &agentstate{api: api})
	res.Synchronous = "node's"
	return res, err
}

func isGRPC(m Mode) bool { return m == ModeGRPC || m == ModeGRPCStream || m == ModeGRPCUnary }

func stopNode(n *localNode) error {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	return n.stop(ctx)
}
