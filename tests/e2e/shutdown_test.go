package e2e_test

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// ack is what the node acknowledged for one message.
type ack struct {
	session string
	seq     int64
}

// TestSIGTERMUnderLoadLosesNothing appends from several goroutines with
// client message ids, sends SIGTERM once enough appends were acknowledged,
// lets the workers run into the shutdown, and then opens the database
// file directly: every acknowledged message must be there, in its
// session, at its acknowledged sequence, with sequences dense. The node
// must exit 0, and a node restarted on the file must verify its audit
// chain.
func TestSIGTERMUnderLoadLosesNothing(t *testing.T) {
	const (
		sessionsN = 4
		workers   = 8
		sigAfter  = 200 // acknowledged appends before SIGTERM
	)
	n := startNode(t)
	conn := n.conn()
	client := sessionv1.NewSessionServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var sids []string
	for range sessionsN {
		cr, err := client.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "load"})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		sids = append(sids, cr.GetSession().GetSessionId())
	}

	var (
		mu        sync.Mutex
		acks      = map[string]ack{} // message id -> acknowledged place
		acked     atomic.Int64
		enough    = make(chan struct{})
		enoughOne sync.Once
		wg        sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := sids[w%sessionsN]
			for i := 0; ; i++ {
				turn := []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "q", MessageId: ids.New()}}
				if i%2 == 1 {
					turn = append(turn, &sessionv1.NewMessage{Role: sessionv1.Role_ROLE_ASSISTANT, Content: "a", MessageId: ids.New()})
				}
				r, err := client.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: turn})
				if err != nil {
					// The node is going away: new requests are refused.
					// Anything else is a bug.
					if c := status.Code(err); c != codes.Unavailable {
						t.Errorf("worker %d: Append during shutdown: %v (want only UNAVAILABLE)", w, err)
					}
					return
				}
				if len(r.GetMessages()) != len(turn) {
					t.Errorf("worker %d: %d acks for %d messages", w, len(r.GetMessages()), len(turn))
					return
				}
				mu.Lock()
				for j, m := range r.GetMessages() {
					if m.GetMessageId() != turn[j].GetMessageId() {
						t.Errorf("ack %d names %s, sent %s", j, m.GetMessageId(), turn[j].GetMessageId())
					}
					acks[m.GetMessageId()] = ack{session: sid, seq: m.GetSequence()}
				}
				mu.Unlock()
				if acked.Add(1) >= sigAfter {
					enoughOne.Do(func() { close(enough) })
				}
			}
		}()
	}
	select {
	case <-enough:
	case <-ctx.Done():
		t.Fatalf("only %d appends acknowledged before the deadline", acked.Load())
	}
	code := n.terminate(90 * time.Second)
	wg.Wait()
	if code != 0 {
		t.Fatalf("node exited %d after SIGTERM, want 0", code)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d appends (%d messages) acknowledged; SIGTERM after %d", acked.Load(), len(acks), sigAfter)

	// Open the file the node wrote, directly.
	store, err := sqlite.Open(n.db)
	if err != nil {
		t.Fatalf("open the node's database: %v", err)
	}
	r := store.Reader()
	stored := map[string]ack{}
	for _, sid := range sids {
		var next int64
		for {
			page, err := r.ListMessages(ctx, sid, next, 1000)
			if err != nil {
				t.Fatalf("ListMessages: %v", err)
			}
			if len(page) == 0 {
				break
			}
			for _, m := range page {
				if m.GetSequence() != next {
					t.Fatalf("session %s: sequence %d follows %d; sequences must be dense", sid, m.GetSequence(), next-1)
				}
				stored[m.GetMessageId()] = ack{session: sid, seq: m.GetSequence()}
				next++
			}
		}
	}
	for id, a := range acks {
		s, ok := stored[id]
		if !ok {
			t.Errorf("acknowledged message %s (session %s, sequence %d) is not in the database", id, a.session, a.seq)
		} else if s != a {
			t.Errorf("message %s acknowledged at %v, stored at %v", id, a, s)
		}
	}
	if err := store.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	// A node restarted on the file serves it and verifies the audit chain.
	n2 := startNodeOn(t, n.dir)
	var ver auditv1.VerifyResponse
	n2.cli(nil, "audit", "verify").ok(t, &ver)
	if !ver.GetOk() || ver.GetEntriesChecked() < sessionsN {
		t.Fatalf("verify after restart printed %v", &ver)
	}
	if code := n2.terminate(60 * time.Second); code != 0 {
		t.Fatalf("restarted node exited %d", code)
	}
}

// TestSIGTERMEndsHeldAppendStreams: clients hold an AppendStream, an
// AppendBatches stream and a health Watch open, idle, when the node gets
// SIGTERM. The node
// must not wait out its shutdown timeout (60 s here) for them: the
// streams end with UNAVAILABLE by themselves, and the node exits 0 well
// before the timeout, with what was acknowledged on them stored.
func TestSIGTERMEndsHeldAppendStreams(t *testing.T) {
	const shutdownTimeout = 60 * time.Second
	n := startNode(t, "--shutdown-timeout", shutdownTimeout.String())
	client := sessionv1.NewSessionServiceClient(n.conn())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cr, err := client.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "held"})
	if err != nil {
		t.Fatal(err)
	}
	sid := cr.GetSession().GetSessionId()
	turn := func(id string) *sessionv1.AppendRequest {
		return &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_USER, Content: "held", MessageId: id}}}
	}

	single, err := client.AppendStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := ids.New()
	if err := single.Send(turn(first)); err != nil {
		t.Fatal(err)
	}
	if out, err := single.Recv(); err != nil || out.GetResponse() == nil {
		t.Fatalf("append on the stream: %v, %v", out, err)
	}
	batches, err := client.AppendBatches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second := ids.New()
	if err := batches.Send(&sessionv1.AppendBatch{Appends: []*sessionv1.TaggedAppend{{Tag: 1, Request: turn(second)}}}); err != nil {
		t.Fatal(err)
	}
	if out, err := batches.Recv(); err != nil || len(out.GetOutcomes()) != 1 || out.GetOutcomes()[0].GetOutcome().GetResponse() == nil {
		t.Fatalf("append on the batch stream: %v, %v", out, err)
	}

	// A health Watch stream is held as well.
	watch, err := healthpb.NewHealthClient(n.conn()).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := watch.Recv(); err != nil || st.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health watch: %v, %v", st, err)
	}

	// The streams stay open and idle; each must be ended by the node.
	ended := make(chan error, 3)
	go func() {
		for {
			if _, err := watch.Recv(); err != nil { // NOT_SERVING may come first
				ended <- err
				return
			}
		}
	}()
	go func() {
		_, err := single.Recv()
		ended <- err
	}()
	go func() {
		_, err := batches.Recv()
		ended <- err
	}()
	start := time.Now()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-ended; status.Code(err) != codes.Unavailable {
			t.Fatalf("a held stream ended with %v, want UNAVAILABLE from the draining node", err)
		}
	}
	if code := n.waitExit(shutdownTimeout); code != 0 {
		t.Fatalf("node exited %d after SIGTERM, want 0", code)
	}
	took := time.Since(start)
	t.Logf("SIGTERM to exit with three held streams: %v", took)
	if took > shutdownTimeout/3 {
		t.Fatalf("shutdown took %v with held streams; it waited on them (timeout %v)", took, shutdownTimeout)
	}
	store, err := sqlite.Open(n.db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	msgs, err := store.Reader().ListMessages(ctx, sid, 0, 10)
	if err != nil || len(msgs) != 2 || msgs[0].GetMessageId() != first || msgs[1].GetMessageId() != second {
		t.Fatalf("stored %v, %v; want the two acknowledged appends", msgs, err)
	}
}
