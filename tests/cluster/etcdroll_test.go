package cluster_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	nodeclient "github.com/agentstate/agentstate/node/client"
	"github.com/agentstate/agentstate/tests/checker"
	"github.com/agentstate/agentstate/tests/testpki"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestClusterEtcdRollingRestart restarts every member of a three-member
// etcd cluster, one at a time, under the checker's load, the way an
// orchestrator rolls a fleet: SIGTERM (the member deregisters and its
// sessions move), then the same command again (a new member id and remote
// port: it joins as a new member and takes its share back). After each
// leave and each rejoin every session is served again (probed), and the
// leaves' p99 is held to servedBound. The verdict is the checker's: no
// acknowledged write lost, duplicated or reordered, the audit chain
// verifies.
//
// Authentication is on, as in production (docs/OPERATIONS.md, "Tenants"):
// the gRPC API takes TLS and client certificates (--tls-client-ca), the
// identities file names an operator (bearer token) and a tenant (its
// certificate's SPIFFE id); the load runs as the tenant in its own
// namespace, the read-back and the probes as the operator; members reach
// each other over mutual TLS.
func TestClusterEtcdRollingRestart(t *testing.T) {
	ctx := runContext(t)
	etcd := startEtcd(t, ctx, "http", plainHTTP)
	dsn := database(t)
	s := seed(t)
	pki := testpki.New(t)
	cert, key := pki.Leaf(t, "member")
	tenantCert, tenantKey := pki.ClientLeaf(t, "tenant", nil, []string{tenantID})
	args := []string{"--data", dsn, "--cluster", "R", "--membership", "etcd", "--etcd-endpoints", etcd.Endpoint,
		"--log-level", "warn", "--auth-file", identities(t),
		"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", pki.CA,
		"--remote-tls-cert", cert, "--remote-tls-key", key, "--remote-tls-ca", pki.CA}
	roots, err := nodeclient.LoadCertPool(pki.CA)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(tenantCert, tenantKey)
	if err != nil {
		t.Fatal(err)
	}
	nodeBinary(t) // built before the clock starts
	begin := time.Now()
	ms := startMembersWith(t, ctx, nodeclient.Options{RootCAs: roots, Token: "operator-token"}, [][]string{args, args, args})
	t.Logf("etcd and 3 members ready in %v", time.Since(begin).Round(time.Millisecond))
	waitAllMembers(t, ctx, ms)

	var tenantConns []grpc.ClientConnInterface
	for _, m := range ms {
		c, err := m.DialWith(nodeclient.Options{RootCAs: roots, Certificates: []tls.Certificate{pair}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		tenantConns = append(tenantConns, c)
	}
	// The tenant is its certificate's principal: another namespace is
	// refused to it, on every member.
	for i, c := range tenantConns {
		_, err := sessionv1.NewSessionServiceClient(c).Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "x", Namespace: "other"})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("member %d: the tenant created a session in another namespace: %v, want PERMISSION_DENIED", i, err)
		}
	}
	ledger := checker.NewLedger()
	load := checker.NewClusterLoad(tenantConns, ledger, checker.LoadConfig{
		Sessions: 12, Clients: 6, Plans: 2, Seed: s, RPCTimeout: 5 * time.Second, Namespace: "tenant"})
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

	left, rejoined := &served{}, &served{}
	for i, m := range ms {
		if err := waitProgress(ctx, load, 40); err != nil {
			abort("before restarting member %d: %v", i, err)
		}
		others := append(append([]*member(nil), ms[:i]...), ms[i+1:]...)
		t0 := time.Now()
		exited := stopAsync(m)
		took, err := left.probe(ctx, t0, others, ledger, "tenant", sessions)
		if err := <-exited; err != nil {
			abort("SIGTERM member %d: %v", i, err)
		}
		if err != nil {
			abort("after member %d left: %v", i, err)
		}
		t1 := time.Now()
		if err := m.Start(ctx); err != nil {
			abort("restart member %d: %v", i, err)
		}
		waitAllMembers(t, ctx, ms)
		back := time.Since(t1)
		took2, err := rejoined.probe(ctx, time.Now(), ms, ledger, "tenant", sessions)
		if err != nil {
			abort("after member %d rejoined: %v", i, err)
		}
		t.Logf("member %d: left, all sessions served again within %v; back in %v (ready, seen by all), then all served within %v",
			i, took.Round(time.Millisecond), back.Round(time.Millisecond), took2.Round(time.Millisecond))
	}
	if err := waitProgress(ctx, load, 40); err != nil {
		abort("after the last restart: %v", err)
	}
	close(stop)
	if err := <-ran; err != nil {
		t.Fatalf("load: %v", err)
	}
	o, err := checker.Observe(ctx, ms[0].conn, ledger)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	r := checker.Check(ledger, o)
	load.Fill(&r)
	t.Logf("%s\nfailures: %s\nleaves: %s\nrejoins: %s", &r, checker.FormatFailures(load.Failures()), left, rejoined)
	if err := r.Err(); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.Problems, "\n"))
	}
	if r.AppendsAcked == 0 || r.PlanErrorsAcked == 0 || r.AuditAcked == 0 {
		t.Errorf("the load did not exercise appends, plan records and audited writes: %s", &r)
	}
	if _, _, p99, _ := left.stats(); p99 > servedBound {
		t.Errorf("sessions served again after a member left: p99 %v, want at most %v", p99.Round(time.Millisecond), servedBound)
	}
	for i, m := range ms {
		if err := m.Stop(30 * time.Second); err != nil {
			t.Errorf("member %d: SIGTERM: %v", i, err)
		}
	}
}

// stopAsync SIGTERMs m and returns at once; the channel answers when it
// exited. A graceful leave deregisters first and drains after: sessions are
// served elsewhere while it drains, which a probe started after the exit
// would not see.
func stopAsync(m *member) <-chan error {
	done := make(chan error, 1)
	go func() { done <- m.Stop(30 * time.Second) }()
	return done
}

// waitAllMembers waits until every member of ms counts them all.
func waitAllMembers(t *testing.T, ctx context.Context, ms []*member) {
	t.Helper()
	for _, m := range ms {
		waitMetric(t, ctx, m, `agentstate_cluster_members`, func(v float64) bool { return v == float64(len(ms)) })
	}
}

// tenantID is the tenant's SPIFFE id, its client certificate's URI SAN.
const tenantID = "spiffe://agentstate.test/tenant"

// identities writes an identities file (docs/OPERATIONS.md, "Tenants"):
// an operator, admin everywhere, with the bearer token "operator-token",
// and a tenant, admin of its namespace "tenant" (its sessions, plans and
// audit entries) and of nothing else, known by its client certificate
// (tenantID).
func identities(t *testing.T) string {
	t.Helper()
	h := sha256.Sum256([]byte("operator-token"))
	file := `{"principals":[` +
		`{"name":"operator","token_sha256":["` + hex.EncodeToString(h[:]) + `"],"operator":true,"grants":[{"namespace":"*","role":"admin"}]},` +
		`{"name":"tenant","uri_sans":["` + tenantID + `"],"grants":[{"namespace":"tenant","role":"admin"}]}]}`
	path := filepath.Join(t.TempDir(), "identities.json")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
