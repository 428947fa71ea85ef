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
	if cfg.Mode == ModeGRPC && cfg.Addr != "" {
		return runRemote(ctx, cfg)
	}
	dir, err := os.MkdirTemp(cfg.DataDir, "agentstate-bench-*")
	if err != nil {
		return Result{}, fmt.Errorf("bench: data dir: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, cfg.Mode+".db")

	switch cfg.Mode {
	case ModeRaw:
		return runRaw(ctx, cfg, path)
	case ModeBaseline:
		b, err := openBaseline(ctx, path, cfg.Synchronous)
		if err != nil {
			return Result{}, err
		}
		res, err := Drive(ctx, cfg, b)
		return res, errors.Join(err, b.Close())
	case ModeInProcess:
		n, err := startNode(path, cfg.Synchronous)
		if err != nil {
			return Result{}, err
		}
		res, err := Drive(ctx, cfg, n.target())
		return res, errors.Join(err, stopNode(n))
	case ModeGRPC:
		return runLoopback(ctx, cfg, path)
	}
	return Result{}, fmt.Errorf("bench: unknown mode %q", cfg.Mode)
}

// runLoopback measures gRPC against a node this run starts on loopback.
func runLoopback(ctx context.Context, cfg Config, path string) (Result, error) {
	n, err := startNode(path, cfg.Synchronous)
	if err != nil {
		return Result{}, err
	}
	srv, addr, err := loopbackServer(n)
	if err != nil {
		return Result{}, errors.Join(err, stopNode(n))
	}
	conns, err := dial(addr)
	if err != nil {
		srv.Stop()
		return Result{}, errors.Join(err, stopNode(n))
	}
	t := &agentstate{api: newGRPCSessions(conns), counter: &n.commits}
	res, err := Drive(ctx, cfg, t)
	closeConns(conns)
	srv.GracefulStop()
	return res, errors.Join(err, stopNode(n))
}

// runRemote measures gRPC against the node at cfg.Addr. Its durability is
// the node's; its commits are not visible from here.
func runRemote(ctx context.Context, cfg Config) (Result, error) {
	conns, err := dial(cfg.Addr)
	if err != nil {
		return Result{}, err
	}
	defer closeConns(conns)
	res, err := Drive(ctx, cfg, &agentstate{api: newGRPCSessions(conns)})
	res.Synchronous = "node's"
	return res, err
}

func stopNode(n *localNode) error {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	return n.stop(ctx)
}
