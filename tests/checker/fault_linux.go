//go:build linux

package checker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// LimitFileSize lowers the running node's RLIMIT_FSIZE soft limit to
// limit bytes: from then on the kernel refuses every write of the node at
// or past that offset of any file (EFBIG; a write that crosses it is cut
// short), which SQLite reports as a full disk or an I/O error. Unlike file
// permissions it holds for root, and it can be lifted while the node runs
// (ClearFileSizeLimit). The node's output goes to a pipe, so its logging is
// not affected.
func (n *Node) LimitFileSize(limit uint64) error {
	pid := n.PID()
	if pid == 0 {
		return fmt.Errorf("checker: node not running")
	}
	var cur unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &cur); err != nil {
		return fmt.Errorf("checker: prlimit get: %w", err)
	}
	lim := unix.Rlimit{Cur: min(limit, cur.Max), Max: cur.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		return fmt.Errorf("checker: prlimit set: %w", err)
	}
	return nil
}

// ClearFileSizeLimit raises the node's RLIMIT_FSIZE soft limit back to its
// hard limit (unlimited unless the test runs under one).
func (n *Node) ClearFileSizeLimit() error {
	pid := n.PID()
	if pid == 0 {
		return fmt.Errorf("checker: node not running")
	}
	var cur unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &cur); err != nil {
		return fmt.Errorf("checker: prlimit get: %w", err)
	}
	lim := unix.Rlimit{Cur: cur.Max, Max: cur.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		return fmt.Errorf("checker: prlimit set: %w", err)
	}
	return nil
}

// FaultConfig sizes a fault run. Zero fields take the defaults in brackets.
type FaultConfig struct {
	Load LoadConfig
	// Progress is the acknowledged operations the load must make before
	// the fault, after it is cleared, and after the final restart [40].
	Progress int
	// Errors is how many failed attempts with RESOURCE_EXHAUSTED or
	// UNAVAILABLE the callers must see before the fault is cleared
	// [Load.Clients].
	Errors int
	// Slack is the upper bound of the random number of bytes the database
	// may still grow by once the fault is set, so the fault lands at a
	// random point of a transaction [64 KiB].
	Slack int64
	// PhaseTimeout bounds each wait: for progress, for the errors, for the
	// service to resume [2m].
	PhaseTimeout time.Duration
	Seed         uint64
	Logf         func(format string, args ...any)
}

// FaultReport is a fault run's figures: the usual Report (judged after the
// whole run) plus what the callers saw while the fault held.
type FaultReport struct {
	Report
	LimitBytes uint64
	// Failures by code between setting and clearing the fault.
	DuringFault map[codes.Code]int64
	// Operations acknowledged while the fault held (writes that still fit).
	AckedDuringFault int64
	// The latest failure message per code when the fault was cleared.
	Messages map[codes.Code]string
}

// FaultRun drives a load against the running node n, makes its database
// files unable to grow mid-load (LimitFileSize), waits until the callers
// have seen cfg.Errors RESOURCE_EXHAUSTED/UNAVAILABLE failures, lifts the
// fault while the node runs and waits until appends are acknowledged
// again, then kills and restarts the node (so what was acknowledged must
// be on disk), stops the load and checks everything acknowledged.
func FaultRun(ctx context.Context, n *Node, conn grpc.ClientConnInterface, cfg FaultConfig) (FaultReport, error) {
	cfg.Load = cfg.Load.withDefaults()
	if cfg.Progress == 0 {
		cfg.Progress = 40
	}
	if cfg.Errors == 0 {
		cfg.Errors = cfg.Load.Clients
	}
	if cfg.Slack == 0 {
		cfg.Slack = 64 << 10
	}
	if cfg.PhaseTimeout == 0 {
		cfg.PhaseTimeout = 2 * time.Minute
	}
	if cfg.Load.Seed == 0 {
		cfg.Load.Seed = cfg.Seed
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	var fr FaultReport
	ledger := NewLedger()
	load := NewLoad(conn, ledger, cfg.Load)
	if err := load.Setup(ctx); err != nil {
		return fr, fmt.Errorf("checker: create sessions: %w", err)
	}
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	stop := make(chan struct{})
	ran := make(chan error, 1)
	go func() { ran <- load.Run(loadCtx, stop) }()

	err := faultPhases(ctx, n, load, cfg, &fr)
	if err != nil {
		cancelLoad()
		<-ran
		return fr, err
	}
	close(stop)
	if err := <-ran; err != nil {
		return fr, fmt.Errorf("checker: load: %w", err)
	}
	fr.Report, err = verify(ctx, conn, ledger, load, 1)
	return fr, err
}

func faultPhases(ctx context.Context, n *Node, load *Load, cfg FaultConfig, fr *FaultReport) error {
	if err := waitProgress(ctx, load, cfg.Progress, cfg.PhaseTimeout); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x66756c6c))
	fr.LimitBytes = uint64(largestFile(n.DB, n.DB+"-wal") + rng.Int64N(cfg.Slack))
	before, ackedBefore := load.Failures(), load.Acked()
	if err := n.LimitFileSize(fr.LimitBytes); err != nil {
		return err
	}
	cfg.Logf("fault set: files limited to %d bytes, %d operations acknowledged so far", fr.LimitBytes, ackedBefore)
	if err := waitFailures(ctx, load, before, int64(cfg.Errors), cfg.PhaseTimeout); err != nil {
		return err
	}
	if err := n.ClearFileSizeLimit(); err != nil {
		return err
	}
	after := load.Failures()
	fr.Messages = load.LastFailures()
	fr.DuringFault = make(map[codes.Code]int64)
	for c, k := range after {
		if d := k - before[c]; d > 0 {
			fr.DuringFault[c] = d
		}
	}
	fr.AckedDuringFault = load.Acked() - ackedBefore
	cfg.Logf("fault cleared (live): callers saw %s; %d operations acknowledged during the fault", FormatFailures(fr.DuringFault), fr.AckedDuringFault)
	if err := waitProgress(ctx, load, cfg.Progress, cfg.PhaseTimeout); err != nil {
		return fmt.Errorf("checker: service did not resume after the fault was cleared: %w", err)
	}
	if err := n.Kill(); err != nil {
		return err
	}
	if err := n.Start(ctx); err != nil {
		return err
	}
	return waitProgress(ctx, load, cfg.Progress, cfg.PhaseTimeout)
}

// waitFailures polls until the callers have seen at least k more
// RESOURCE_EXHAUSTED or UNAVAILABLE failures than in before, for at most
// timeout.
func waitFailures(ctx context.Context, load *Load, before map[codes.Code]int64, k int64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		now := load.Failures()
		got := now[codes.ResourceExhausted] - before[codes.ResourceExhausted] + now[codes.Unavailable] - before[codes.Unavailable]
		if got >= k {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("checker: callers saw %d of %d expected store errors during the fault (all failures: %s): %w",
				got, k, FormatFailures(now), ctx.Err())
		case <-t.C:
		}
	}
}

func largestFile(paths ...string) int64 {
	var m int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			m = max(m, fi.Size())
		}
	}
	return m
}
