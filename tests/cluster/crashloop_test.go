package cluster_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/tests/checker"
	"github.com/agentstate/agentstate/tests/cluster"
)

// TestClusterCrashLoop runs the checker's load over three members of one
// cluster on one PostgreSQL database, SIGKILLs a random member -kills
// times (restarting it each time) while clients retry — on another member
// when theirs is down — and checks that every acknowledged message is
// stored exactly once with dense sequences. It reports the failover time.
func TestClusterCrashLoop(t *testing.T) {
	dsn := database(t)
	ctx := runContext(t)
	s := seed(t)
	begin := time.Now()
	ms := startCluster(t, ctx, dsn, "T", "T", "T")
	t.Logf("3 members ready in %v", time.Since(begin).Round(time.Millisecond))

	fo := cluster.NewFailover()
	var acksBy [3]atomic.Int64
	ledger := checker.NewLedger()
	load := checker.NewClusterLoad(conns(ms), ledger, checker.LoadConfig{
		Sessions: *flagSessions, Clients: *flagClients, Plans: *flagPlans, Seed: s,
		// Longer than the router's per-attempt timeout plus a retry, so an
		// attempt reaching a member whose peer just died is answered by it.
		RPCTimeout: 5 * time.Second,
		OnAppend: func(conn int, session string, err error) {
			fo.Append(session, err, time.Now())
			if err == nil {
				acksBy[conn].Add(1)
			}
		},
	})
	if err := load.Setup(ctx); err != nil {
		t.Fatalf("create sessions: %v", err)
	}
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	stop := make(chan struct{})
	ran := make(chan error, 1)
	go func() { ran <- load.Run(loadCtx, stop) }()
	abort := func(format string, args ...any) {
		t.Helper()
		cancelLoad()
		<-ran
		t.Fatalf(format+"\nfailures: %s; last: %v", append(args, checker.FormatFailures(load.Failures()), load.LastFailures())...)
	}

	rng := rand.New(rand.NewPCG(s, 0x636c7573))
	kills := 0
	var restart time.Duration
	for kills < *flagKills {
		if err := waitProgress(ctx, load, *flagProgress); err != nil {
			abort("before kill %d: %v", kills+1, err)
		}
		// The kill's random moment and victim, not a synchronization.
		delay := 20*time.Millisecond + time.Duration(rng.Int64N(int64(*flagMaxDelay)))
		if err := pause(ctx, delay); err != nil {
			abort("%v", err)
		}
		victim := rng.IntN(len(ms))
		// Before the kill, not after: clients see it (EOF) before Kill
		// returns, and their failures must count from this kill, not the
		// previous one (that once made ~10 ms outages read as ~1.5 s).
		fo.Killed(time.Now())
		if err := ms[victim].Kill(); err != nil {
			abort("kill member %d: %v", victim, err)
		}
		kills++
		t0 := time.Now()
		if err := ms[victim].Start(ctx); err != nil {
			abort("restart member %d: %v", victim, err)
		}
		restart = max(restart, time.Since(t0))
		t.Logf("kill %d/%d: member %d after %v; %d operations acknowledged", kills, *flagKills, victim,
			delay.Round(time.Millisecond), load.Acked())
	}
	// The cluster serves after the last restart too.
	if err := waitProgress(ctx, load, *flagProgress); err != nil {
		abort("after the last restart: %v", err)
	}
	close(stop)
	if err := <-ran; err != nil {
		t.Fatalf("load: %v", err)
	}

	// Read back through one member: every session and plan is reached by
	// id from any of them.
	o, err := checker.Observe(ctx, ms[rng.IntN(len(ms))].conn, ledger)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	r := checker.Check(ledger, o)
	r.Kills = kills
	load.Fill(&r)
	st := fo.Stats()
	t.Logf("%s\nacks by member: %d %d %d; failures: %s; restart (ready) max %v\nfailover: %d outages p50=%v max=%v (target < 2s) open=%d",
		&r, acksBy[0].Load(), acksBy[1].Load(), acksBy[2].Load(), checker.FormatFailures(load.Failures()),
		restart.Round(time.Millisecond), st.N, st.P50.Round(time.Millisecond), st.Max.Round(time.Millisecond), st.Open)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range acksBy {
		if acksBy[i].Load() == 0 {
			t.Errorf("member %d acknowledged no append: the load did not reach every member", i)
		}
	}
	if st.Open != 0 {
		t.Errorf("%d sessions failed after a kill and were never acknowledged again", st.Open)
	}
	// A graceful leave exits 0 on every member.
	for i, m := range ms {
		if err := m.Stop(30 * time.Second); err != nil {
			t.Errorf("member %d: SIGTERM: %v", i, err)
		}
		if n := m.RaceReports(); n > 0 {
			t.Errorf("member %d: %d data races reported", i, n)
		}
	}
}

// waitProgress waits until the load made n more acknowledgements, for at
// most two minutes.
func waitProgress(ctx context.Context, load *checker.Load, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return load.WaitAcked(ctx, load.Acked()+int64(n))
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
