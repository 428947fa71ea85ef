package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/tests/checker"
	"github.com/agentstate/agentstate/tests/cluster"
	pacluster "github.com/asynkron/protoactor-go/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// servedBound is the longest a session may go unserved after a member
// leaves or dies: the etcd provider's lease is 3 s, the rest is slack for
// a loaded CI machine. The measured figures are logged.
const servedBound = 20 * time.Second

// TestClusterEtcdMembership: three members that find each other in etcd
// serve the checker's load; a fourth joins at runtime and takes over
// sessions; one member leaves gracefully and one is SIGKILLed, and after
// each every session is acknowledged again within servedBound; the killed
// one is replaced under a new address, which takes its share. The verdict
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

	served := newServedTracker()
	fo := cluster.NewFailover()
	ledger := checker.NewLedger()
	load := checker.NewClusterLoad(conns(ms), ledger, checker.LoadConfig{
		Sessions: 12, Clients: 6, Plans: 2, Seed: s, RPCTimeout: 5 * time.Second,
		OnAppend: func(_ int, session string, err error) {
			fo.Append(session, err, time.Now())
			served.append(session, err)
		},
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

	// One member leaves gracefully, one dies; every session is served
	// again after each.
	for _, leave := range []struct {
		name  string
		index int
		do    func(m *member) error
	}{
		{"SIGTERM", 0, func(m *member) error { return m.Stop(30 * time.Second) }},
		{"SIGKILL", 1, func(m *member) error { return m.Kill() }},
	} {
		if err := waitProgress(ctx, load, 30); err != nil {
			abort("before %s: %v", leave.name, err)
		}
		t0 := time.Now()
		served.reset(t0)
		fo.Killed(t0)
		if err := leave.do(ms[leave.index]); err != nil {
			abort("%s member %d: %v", leave.name, leave.index, err)
		}
		took, err := served.wait(ctx, sessions, servedBound)
		if err != nil {
			abort("after %s of member %d: %v", leave.name, leave.index, err)
		}
		t.Logf("%s of member %d: all %d sessions acknowledged again within %v", leave.name, leave.index, len(sessions), took.Round(time.Millisecond))
	}
	// The killed member is replaced under a new address: the others are
	// not touched, and the replacement owns its share.
	fifth, held := joinMember(t, ctx, etcd, args, ms[2:], ledger, sessions, "member 4 (replaces member 1)")
	ms = append(ms, fifth)
	if err := waitProgress(ctx, load, 30); err != nil {
		abort("after the replacement: %v", err)
	}
	close(stop)
	if err := <-ran; err != nil {
		t.Fatalf("load: %v", err)
	}
	o, err := checker.Observe(ctx, ms[2].conn, ledger)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	r := checker.Check(ledger, o)
	load.Fill(&r)
	st := fo.Stats()
	t.Logf("%s\nfailures: %s\nfailover: %d outages p50=%v max=%v open=%d", &r, checker.FormatFailures(load.Failures()),
		st.N, st.P50.Round(time.Millisecond), st.Max.Round(time.Millisecond), st.Open)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}

	etcdOutage(t, ctx, etcd, ms[2:], ledger, held)
	// The append made during the outage is stored like the others.
	if o, err = checker.Observe(ctx, ms[3].conn, ledger); err != nil {
		t.Fatalf("observe after the outage: %v", err)
	}
	if r := checker.Check(ledger, o); r.Err() != nil {
		t.Fatalf("after the outage: %v", r.Err())
	}

	for i := 2; i < len(ms); i++ {
		if err := ms[i].Stop(30 * time.Second); err != nil {
			t.Errorf("member %d: SIGTERM: %v", i, err)
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

// registered returns the members registered in etcd under the default
// prefix for cluster E, as the cluster sees them.
func registered(t *testing.T, ctx context.Context, endpoint string) pacluster.Members {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "/agentstate/E/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out pacluster.Members
	for _, kv := range resp.Kvs {
		var n struct {
			ID    string   `json:"id"`
			Host  string   `json:"host"`
			Port  int32    `json:"port"`
			Kinds []string `json:"kinds"`
		}
		if err := json.Unmarshal(kv.Value, &n); err != nil {
			t.Fatalf("%s: %v", kv.Key, err)
		}
		out = append(out, &pacluster.Member{Id: n.ID, Host: n.Host, Port: n.Port, Kinds: n.Kinds})
	}
	return out
}

// newMember returns the address of the one member in after and not before.
func newMember(t *testing.T, before, after pacluster.Members) string {
	t.Helper()
	old := map[string]bool{}
	for _, m := range before {
		old[m.Address()] = true
	}
	var added []string
	for _, m := range after {
		if !old[m.Address()] {
			added = append(added, m.Address())
		}
	}
	if len(added) != 1 {
		t.Fatalf("members registered in etcd: %d before, %d after, new: %v; want one new", len(before), len(after), added)
	}
	return added[0]
}

// createVia creates session id through m and records it.
func createVia(t *testing.T, ctx context.Context, m *member, ledger *checker.Ledger, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := sessionv1.NewSessionServiceClient(m.conn).Create(ctx, &sessionv1.CreateSessionRequest{
		SessionId: id, ActorName: "checker", Namespace: "checker", MetadataJson: "{}"}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("create %s via %s: %v", id, m.GRPCAddr, err)
	}
	ledger.SessionCreated(id)
}

// byHand is the ledger's client id of appendVia (the load's are small).
const byHand = 1000

// appendVia appends one message to session through m and records it.
func appendVia(t *testing.T, ctx context.Context, m *member, ledger *checker.Ledger, session string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	id := ids.New()
	// Content unique per message: the checker reads equal content as a duplicate.
	tr := checker.Turn{Session: session, Messages: []checker.Msg{{ID: id, Role: sessionv1.Role_ROLE_USER, Content: "by hand " + id}}}
	ledger.AppendSent(tr)
	resp, err := sessionv1.NewSessionServiceClient(m.conn).Append(ctx, tr.Request(), grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("append to %s via %s: %v", session, m.GRPCAddr, err)
	}
	ledger.AppendAcked(byHand, tr, false, resp)
}

// waitMetric polls m's sample until ok holds (at most 30 s) and returns it.
func waitMetric(t *testing.T, ctx context.Context, m *member, sample string, ok func(float64) bool) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		v := metricOf(t, m, sample)
		if ok(v) {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s of %s stayed %v: %v", sample, m.HTTPAddr, v, ctx.Err())
		case <-tick.C:
		}
	}
}

// waitReadyz polls m's /readyz until it answers code (at most 30 s) and
// returns its body.
func waitReadyz(t *testing.T, ctx context.Context, m *member, code int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		got, body := readyz(t, m)
		if got == code {
			return body
		}
		select {
		case <-ctx.Done():
			t.Fatalf("/readyz of %s stayed %d %q: %v", m.HTTPAddr, got, body, ctx.Err())
		case <-tick.C:
		}
	}
}

// servedTracker records, per session, the first acknowledged append since
// the latest reset.
type servedTracker struct {
	mu      sync.Mutex
	since   time.Time
	first   map[string]time.Time
	changed chan struct{} // closed and replaced on every new session
}

func newServedTracker() *servedTracker {
	return &servedTracker{first: map[string]time.Time{}, changed: make(chan struct{})}
}

func (s *servedTracker) reset(t0 time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.since, s.first = t0, map[string]time.Time{}
}

func (s *servedTracker) append(session string, err error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || s.since.IsZero() || now.Before(s.since) {
		return
	}
	if _, ok := s.first[session]; !ok {
		s.first[session] = now
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// wait waits until every session was acknowledged since the reset and
// returns how long the last one took, or fails after bound.
func (s *servedTracker) wait(ctx context.Context, sessions []string, bound time.Duration) (time.Duration, error) {
	s.mu.Lock()
	deadline := s.since.Add(bound)
	s.mu.Unlock()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		s.mu.Lock()
		var last time.Duration
		missing := 0
		for _, id := range sessions {
			if at, ok := s.first[id]; ok {
				last = max(last, at.Sub(s.since))
			} else {
				missing++
			}
		}
		changed := s.changed
		s.mu.Unlock()
		if missing == 0 {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%d of %d sessions not acknowledged within %v: %w", missing, len(sessions), bound, ctx.Err())
		case <-changed:
		}
	}
}
