package checker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
)

// CrashConfig sizes a crash run. Zero fields take the defaults in brackets.
type CrashConfig struct {
	Load  LoadConfig
	Kills int // SIGKILLs to deliver [5]
	// Before each kill the load must have made Progress acknowledged
	// operations since the restart [40]; the kill then comes after a
	// random delay in [MinDelay, MaxDelay] [20ms, 500ms], so it lands at a
	// random moment of a node under load.
	Progress           int
	MinDelay, MaxDelay time.Duration
	// Seed drives the delays (and, through Load.Seed when that is zero,
	// the load's choices).
	Seed uint64
	// ProgressTimeout bounds each wait for Progress, so a node that stops
	// answering fails the run instead of hanging it [2m].
	ProgressTimeout time.Duration
	// StopTimeout bounds the clean stop (SIGTERM) before the read-back [60s].
	StopTimeout time.Duration
	// Logf, when set, gets one line per kill.
	Logf func(format string, args ...any)
	// Tenants, when set, run the load as these principals, each in its
	// own namespace (Tenant); the read-back goes through CrashLoop's conn
	// (an operator reading every namespace), and CheckIsolation then reads
	// each tenant's writes as every other tenant.
	Tenants []Tenant
}

func (c CrashConfig) withDefaults() CrashConfig {
	if c.Kills == 0 {
		c.Kills = 5
	}
	if c.Progress == 0 {
		c.Progress = 40
	}
	if c.MinDelay == 0 && c.MaxDelay == 0 {
		c.MinDelay, c.MaxDelay = 20*time.Millisecond, 500*time.Millisecond
	}
	if c.MaxDelay < c.MinDelay {
		c.MaxDelay = c.MinDelay
	}
	if c.Load.Seed == 0 {
		c.Load.Seed = c.Seed
	}
	if c.ProgressTimeout == 0 {
		c.ProgressTimeout = 2 * time.Minute
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = time.Minute
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// CrashLoop drives a load against the running node n, kills it with
// SIGKILL cfg.Kills times at random moments, restarting it on the same
// database each time while the clients retry, then stops the load (every
// request answered), stops and restarts the node cleanly, reads
// everything back through conn and checks it.
//
// The error is for a run that could not be carried out (the node did not
// come back, a read failed); what the node got wrong is in the Report
// (Report.Err).
func CrashLoop(ctx context.Context, n *Node, conn grpc.ClientConnInterface, cfg CrashConfig) (Report, error) {
	cfg = cfg.withDefaults()
	ledger := NewLedger()
	load := newLoads(conn, ledger, cfg.Load, cfg.Tenants)
	if err := load.Setup(ctx); err != nil {
		return Report{}, fmt.Errorf("checker: create sessions: %w", err)
	}
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	stop := make(chan struct{})
	ran := make(chan error, 1)
	go func() { ran <- load.Run(loadCtx, stop) }()

	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6b696c6c))
	kills, err := 0, error(nil)
	for kills < cfg.Kills && err == nil {
		if err = waitProgress(ctx, load, cfg.Progress, cfg.ProgressTimeout); err != nil {
			break
		}
		delay := cfg.MinDelay
		if cfg.MaxDelay > cfg.MinDelay {
			delay += time.Duration(rng.Int64N(int64(cfg.MaxDelay - cfg.MinDelay))) // the kill's random moment, not a synchronization
		}
		if err = pause(ctx, delay); err != nil {
			break
		}
		acked := load.Acked()
		if err = n.Kill(); err != nil {
			break
		}
		kills++
		cfg.Logf("kill %d/%d: %v after progress, %d operations acknowledged so far", kills, cfg.Kills, delay.Round(time.Millisecond), acked)
		err = n.Start(ctx)
	}
	if err == nil {
		// The service resumed after the last restart.
		err = waitProgress(ctx, load, cfg.Progress, cfg.ProgressTimeout)
	}
	if err != nil {
		cancelLoad() // clients may be waiting on a node that is gone
		<-ran
		return Report{Kills: kills}, err
	}
	close(stop)
	if err := <-ran; err != nil {
		return Report{Kills: kills}, fmt.Errorf("checker: load: %w", err)
	}
	// Read back from a fresh process after a clean stop: what is checked
	// is what the database holds, not what a live actor remembers, and the
	// drain on SIGTERM is exercised once too.
	if err := n.Stop(cfg.StopTimeout); err != nil {
		return Report{Kills: kills}, err
	}
	if err := n.Start(ctx); err != nil {
		return Report{Kills: kills}, err
	}
	r, err := verify(ctx, conn, ledger, load, kills)
	if err == nil && len(cfg.Tenants) > 0 {
		err = CheckIsolation(ctx, cfg.Tenants, load, &r)
	}
	return r, err
}

// verify reads back what the ledger holds promises about and judges it.
func verify(ctx context.Context, conn grpc.ClientConnInterface, ledger *Ledger, load interface{ Fill(*Report) }, kills int) (Report, error) {
	o, err := Observe(ctx, conn, ledger)
	if err != nil {
		return Report{Kills: kills}, err
	}
	r := Check(ledger, o)
	r.Kills = kills
	load.Fill(&r)
	return r, nil
}

// waitProgress waits until the load has made n more acknowledgements, for
// at most timeout.
func waitProgress(ctx context.Context, load interface {
	Acked() int64
	WaitAcked(context.Context, int64) error
}, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return load.WaitAcked(ctx, load.Acked()+int64(n))
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
