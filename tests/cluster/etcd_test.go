package cluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/tests/checker"
	"github.com/agentstate/agentstate/tests/cluster"
	pacluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestClusterEtcdMembership: three members that find each other in etcd
// serve the checker's load; a fourth joins at runtime and takes over
// sessions; one member leaves gracefully and one is SIGKILLed (-etcd-kills
// more for measurement), and after each every session is probed until
// served again, the p99 held to servedBound; a killed one is replaced under
// a new address, which takes its share. The verdict
// is the checker's: nothing acknowledged lost, sequences dense. Then etcd
// dies: the members report not ready on /readyz, saying why, refuse new
// activations with UNAVAILABLE and keep serving the sessions they hold;
// once etcd is back they are ready and activate again.
func TestClusterEtcdMembership(t *testing.T) {
	ctx := runContext(t)
	etcd := startEtcd(t, ctx, "http", plainHTTP)
	dsn := database(t)
	s := seed(t)
	args := []string{"--data", dsn, "--cluster", "E", "--membership", "etcd", "--etcd-endpoints", etcd.Endpoint,
		"--log-level", "warn", "--insecure-remote-plaintext-loopback"}
	nodeBinary(t) // built before the clock starts
	begin := time.Now()
	ms := startMembers(t, ctx, [][]string{args, args, args})
	t.Logf("etcd and 3 members ready in %v", time.Since(begin).Round(time.Millisecond))
	for i := range ms {
		waitMetric(t, ctx, ms[i], `agentstate_cluster_members`, func(v float64) bool { return v == 3 })
	}

	fo := cluster.NewFailover()
	ledger := checker.NewLedger()
	load := checker.NewClusterLoad(conns(ms), ledger, checker.LoadConfig{
		Sessions: 12, Clients: 6, Plans: 2, Seed: s, RPCTimeout: 5 * time.Second,
		OnAppend: func(_ int, session string, err error) { fo.Append(session, err, time.Now()) },
	})
	if err := load.Setup(ctx); err != nil {
		t.Fatalf("create sessions: %v", err)
	}
	sessions := ledger.Sessions()
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
	if err := waitProgress(ctx, load, 60); err != nil {
		abort("3 members: %v", err)
	}

	// A fourth member joins: the others see it in etcd and it takes over
	// its share of the sessions the load goes on appending to.
	fourth, _ := joinMember(t, ctx, etcd, args, ms, ledger, sessions, "member 3")
	ms = append(ms, fourth)
	live := slices.Clone(ms)

	// Members leave and die; after each, every session is served again
	// (probed through the members still up), and a killed member is
	// replaced under a new address without touching the others.
	leaves, kills := &served{}, &served{}
	rng := rand.New(rand.NewPCG(s, 0x65746364))
	for i := 0; i <= *flagEtcdKills; i++ {
		if err := waitProgress(ctx, load, 30); err != nil {
			abort("before death %d: %v", i+1, err)
		}
		// The first death is a graceful leave (SIGTERM) of member 0, the
		// next a SIGKILL of member 1, later ones SIGKILLs of random members.
		how, victim := "SIGKILL", 0
		switch i {
		case 0:
			how = "SIGTERM"
		case 1:
			victim = slices.Index(live, ms[1])
		default:
			victim = rng.IntN(len(live))
		}
		dead := live[victim]
		live = slices.Delete(live, victim, victim+1)
		t0 := time.Now()
		fo.Killed(t0)
		var exited <-chan error
		if how == "SIGTERM" {
			exited = stopAsync(dead)
		} else if err := dead.Kill(); err != nil {
			abort("SIGKILL member %d: %v", slices.Index(ms, dead), err)
		}
		samples := kills
		if how == "SIGTERM" {
			samples = leaves
		}
		took, err := samples.probe(ctx, t0, live, ledger, "", sessions)
		if exited != nil {
			if err := <-exited; err != nil {
				abort("SIGTERM member %d: %v", slices.Index(ms, dead), err)
			}
		}
		if err != nil {
			abort("after %s of member %d: %v", how, slices.Index(ms, dead), err)
		}
		t.Logf("%s of member %d: all %d sessions served again within %v", how, slices.Index(ms, dead), len(sessions), took.Round(time.Millisecond))
		switch {
		case i == 1:
			next, _ := joinMember(t, ctx, etcd, args, live, ledger, sessions,
				fmt.Sprintf("member %d (replaces member %d)", len(ms), slices.Index(ms, dead)))
			ms, live = append(ms, next), append(live, next)
		case i > 1:
			// Restarted in place: the load's connections (to the first
			// members' gRPC ports) keep reaching members; the cluster sees
			// a new member (new id and remote port) all the same.
			if err := dead.Start(ctx); err != nil {
				abort("restart member %d: %v", slices.Index(ms, dead), err)
			}
			live = append(live, dead)
			waitAllMembers(t, ctx, live)
		}
	}
	if err := waitProgress(ctx, load, 30); err != nil {
		abort("after the replacement: %v", err)
	}
	// A session activated since the last change of membership, for the
	// etcd outage below: its activation predates the outage.
	held := ids.New()
	createVia(t, ctx, live[0], ledger, held)
	appendVia(t, ctx, live[0], ledger, held)
	close(stop)
	if err := <-ran; err != nil {
		t.Fatalf("load: %v", err)
	}
	o, err := checker.Observe(ctx, live[0].conn, ledger)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	r := checker.Check(ledger, o)
	load.Fill(&r)
	st := fo.Stats()
	t.Logf("%s\nfailures: %s\nSIGTERM: %s\nSIGKILL: %s\nload's failover: %d outages p50=%v max=%v open=%d", &r, checker.FormatFailures(load.Failures()),
		leaves, kills, st.N, st.P50.Round(time.Millisecond), st.Max.Round(time.Millisecond), st.Open)
	if err := r.Err(); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.Problems, "\n"))
	}
	for how, smp := range map[string]*served{"SIGTERM": leaves, "SIGKILL": kills} {
		if _, _, p99, _ := smp.stats(); p99 > servedBound {
			t.Errorf("sessions served again after a member's %s: p99 %v, want at most %v", how, p99.Round(time.Millisecond), servedBound)
		}
	}

	etcdOutage(t, ctx, etcd, live, ledger, held)
	// The append made during the outage is stored like the others.
	if o, err = checker.Observe(ctx, live[1].conn, ledger); err != nil {
		t.Fatalf("observe after the outage: %v", err)
	}
	if r := checker.Check(ledger, o); r.Err() != nil {
		t.Fatalf("after the outage: %v", r.Err())
	}

	for _, m := range live {
		if err := m.Stop(30 * time.Second); err != nil {
			t.Errorf("member %d: SIGTERM: %v", slices.Index(ms, m), err)
		}
	}
}

// etcdOutage kills etcd under the running members ms: each reports not
// ready saying etcd is unreachable, a new session is refused UNAVAILABLE
// (and not stored), a held one still takes appends; after etcd restarts
// they are ready again and activate. held is a session activated on one of
// ms since the last change of membership.
func etcdOutage(t *testing.T, ctx context.Context, etcd *etcdServer, ms []*member, ledger *checker.Ledger, held string) {
	t.Helper()
	t0 := time.Now()
	etcd.Kill()
	for i, m := range ms {
		why := waitReadyz(t, ctx, m, http.StatusServiceUnavailable)
		if !strings.Contains(why, "etcd unreachable") {
			t.Fatalf("member %d /readyz without etcd: %q, want it to say etcd is unreachable", i, why)
		}
	}
	t.Logf("etcd killed: members not ready within %v", time.Since(t0).Round(time.Millisecond))

	sid := ids.New()
	callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	create := func() error {
		_, err := sessionv1.NewSessionServiceClient(ms[0].conn).Create(callCtx, &sessionv1.CreateSessionRequest{
			SessionId: sid, ActorName: "checker", Namespace: "checker", MetadataJson: "{}"})
		return err
	}
	t1 := time.Now()
	err := create()
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "takes no new activations") {
		t.Fatalf("create without etcd: %v, want UNAVAILABLE refusing the activation", err)
	}
	t.Logf("create without etcd refused in %v: %v", time.Since(t1).Round(time.Millisecond), err)
	if _, err := sessionv1.NewSessionServiceClient(ms[0].conn).Get(callCtx, &sessionv1.GetSessionRequest{SessionId: sid}); status.Code(err) != codes.NotFound {
		t.Fatalf("the refused session: %v, want NOT_FOUND", err)
	}
	appendVia(t, ctx, ms[0], ledger, held) // its activation predates the outage

	t2 := time.Now()
	if err := etcd.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		waitReadyz(t, ctx, m, http.StatusOK)
	}
	t.Logf("etcd restarted: members ready again within %v", time.Since(t2).Round(time.Millisecond))
	if err := create(); err != nil {
		t.Fatalf("create once etcd is back: %v", err)
	}
}

// joinMember starts a member with args while live run, waits until it and
// each of them count them all as members, and shows that it owns what the
// cluster's hash gives it. The owner of an id is the rendezvous hash over
// the members' addresses (disthash): computed here over etcd's
// registrations, it names a session the new member must host, which is
// created and appended to through live[0], and appended to through the
// new member; its active-session gauge must then count it. It returns the
// member and that session.
func joinMember(t *testing.T, ctx context.Context, etcd *etcdServer, args []string, live []*member,
	ledger *checker.Ledger, sessions []string, name string) (*member, string) {
	t.Helper()
	before := registered(t, ctx, etcd.Endpoint)
	joined := time.Now()
	m := startMembers(t, ctx, [][]string{args})[0]
	all := append(append([]*member(nil), live...), m)
	for _, x := range all {
		waitMetric(t, ctx, x, `agentstate_cluster_members`, func(v float64) bool { return v == float64(len(all)) })
	}
	after := registered(t, ctx, etcd.Endpoint)
	addr := newMember(t, before, after)
	rdv := pacluster.NewRendezvous()
	rdv.UpdateMembers(after)
	ownerOf := func(id string) string {
		return rdv.GetByClusterIdentity(&pacluster.ClusterIdentity{Identity: id, Kind: "session"})
	}
	moved := 0
	for _, id := range sessions {
		if ownerOf(id) == addr {
			moved++
		}
	}
	sid := ids.New()
	for ownerOf(sid) != addr {
		sid = ids.New()
	}
	createVia(t, ctx, live[0], ledger, sid)
	appendVia(t, ctx, live[0], ledger, sid)
	appendVia(t, ctx, m, ledger, sid)
	owned := waitMetric(t, ctx, m, `agentstate_active_actors{kind="session"}`, func(v float64) bool { return v >= 1 })
	t.Logf("%s (%s) joined; %v later it hosts %v session activation(s): session %s, created through another member, "+
		"and %d of the load's %d sessions hash to it", name, addr, time.Since(joined).Round(time.Millisecond), owned, sid, moved, len(sessions))
	return m, sid
}
