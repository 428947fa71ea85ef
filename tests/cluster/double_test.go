package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/tests/checker"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
)

// TestClusterDoubleActivation forces two activations of one session: two
// one-member clusters ("A" and "B", peers of no one but themselves) share
// one database, so each activates the session on its own member. Store
// fencing must leave exactly one of them able to write at a time: the
// older activation's write fails (nothing stored), it answers UNAVAILABLE
// and stops, and its member's router retries on a fresh activation, which
// is now the newest. First in a fixed order (A writes, B writes, A writes
// again), then with clients of both hammering the same sessions and plans;
// the checker's verdict must be clean.
func TestClusterDoubleActivation(t *testing.T) {
	dsn := database(t)
	ctx := runContext(t)
	s := seed(t)
	ms := startCluster(t, ctx, dsn, "A", "B")
	a, b := ms[0], ms[1]
	pg, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	epoch := func(id string) int64 {
		t.Helper()
		var e int64
		if err := pg.QueryRow(ctx, "SELECT epoch FROM owner_epochs WHERE id = $1", id).Scan(&e); err != nil {
			t.Fatalf("epoch of %s: %v", id, err)
		}
		return e
	}

	ledger := checker.NewLedger()
	sid := ids.New()
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := sessionv1.NewSessionServiceClient(a.conn).Create(callCtx, &sessionv1.CreateSessionRequest{
		SessionId: sid, ActorName: "checker", Namespace: "checker", MetadataJson: "{}"}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("create via A: %v", err)
	}
	ledger.SessionCreated(sid)
	turn := 0
	appendVia := func(m *member, name string) int64 {
		t.Helper()
		turn++
		tr := checker.Turn{Session: sid, Messages: []checker.Msg{{ID: ids.New(), Role: sessionv1.Role_ROLE_USER,
			Content: fmt.Sprintf("turn %d via %s", turn, name)}}}
		ledger.AppendSent(tr)
		resp, err := sessionv1.NewSessionServiceClient(m.conn).Append(callCtx, tr.Request(), grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("append %d via %s: %v", turn, name, err)
		}
		ledger.AppendAcked(0, tr, false, resp)
		if got := resp.GetMessages()[0].GetSequence(); got != int64(turn-1) {
			t.Fatalf("append %d via %s stored at sequence %d, want %d", turn, name, got, turn-1)
		}
		return epoch(sid)
	}

	// A owns the session; B's activation supersedes it; A's next write
	// is then made by its stale activation, is fenced, and is retried by
	// A's router on a new activation. Had the stale activation written,
	// it would have reused sequence 1 from its cached state (the
	// sequence check above) and the epoch would not have moved.
	eA := appendVia(a, "A")
	eB := appendVia(b, "B")
	eA2 := appendVia(a, "A")
	t.Logf("epochs: A %d, then B %d, then A again %d", eA, eB, eA2)
	if !(eA < eB && eB < eA2) {
		t.Fatalf("epochs %d, %d, %d: want each activation newer than the last (A's first was fenced and replaced)", eA, eB, eA2)
	}

	// Both members' clients at once, on few sessions and plans, so the two
	// activations keep fencing each other.
	load := checker.NewClusterLoad([]grpc.ClientConnInterface{a.conn, b.conn}, ledger, checker.LoadConfig{
		Sessions: 2, Clients: 8, Plans: 2, Seed: s, RPCTimeout: 10 * time.Second,
	})
	if err := load.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	sessions := ledger.Sessions()
	before := map[string]int64{}
	for _, id := range sessions[1:] {
		before[id] = 0
	}
	stop := make(chan struct{})
	ran := make(chan error, 1)
	go func() { ran <- load.Run(ctx, stop) }()
	werr := func() error {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return load.WaitAcked(wctx, 400)
	}()
	close(stop)
	if err := <-ran; err != nil {
		t.Fatalf("load: %v", err)
	}
	if werr != nil {
		t.Fatalf("%v; failures: %s %v", werr, checker.FormatFailures(load.Failures()), load.LastFailures())
	}
	activations := int64(0)
	for id := range before {
		activations += epoch(id)
	}

	// Reads go to the store, not to an activation: through B they see
	// everything, A's writes included.
	o, err := checker.Observe(ctx, b.conn, ledger)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	r := checker.Check(ledger, o)
	load.Fill(&r)
	t.Logf("%s\nactivations of the load's %d sessions: %d; failures: %s", &r, len(before), activations,
		checker.FormatFailures(load.Failures()))
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if activations <= int64(2*len(before)) {
		t.Errorf("the load's sessions were activated %d times: want more than once per member, i.e. activations fenced each other", activations)
	}
}
