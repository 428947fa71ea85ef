package session_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	_ "github.com/mattn/go-sqlite3"
)

func turnWithIDs(sid string, msgIDs ...string) *sessionv1.AppendRequest {
	r := &sessionv1.AppendRequest{SessionId: sid}
	for i, id := range msgIDs {
		r.Messages = append(r.Messages, &sessionv1.NewMessage{Role: sessionv1.Role_ROLE_USER, Content: fmt.Sprintf("part %d", i), MessageId: id})
	}
	return r
}

func sameAppended(a, b *sessionv1.AppendResponse) bool {
	if len(a.GetMessages()) != len(b.GetMessages()) {
		return false
	}
	for i, m := range a.GetMessages() {
		o := b.GetMessages()[i]
		if m.GetMessageId() != o.GetMessageId() || m.GetSequence() != o.GetSequence() || !m.GetCreatedAt().AsTime().Equal(o.GetCreatedAt().AsTime()) {
			return false
		}
	}
	return true
}

// Every append is sent 2–3 times at once (as a grain client retrying on
// timeout would), and once more after the actors were passivated: nothing
// is stored twice and every copy is answered with the original sequences
// and timestamps.
func TestRetriesAreIdempotent(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	sessions := createSessions(t, n, 4)
	const senders, turns = 16, 25
	type sent struct {
		req  *sessionv1.AppendRequest
		resp *sessionv1.AppendResponse
	}
	results := make([][]sent, senders)
	var wg sync.WaitGroup
	errc := make(chan error, senders)
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < turns; i++ {
				req := turnWithIDs(sessions[(g+i)%len(sessions)], ids.New(), ids.New())
				copies := 2 + (g+i)%2
				resps := make([]*sessionv1.AppendResponse, copies)
				errors := make([]error, copies)
				var cw sync.WaitGroup
				for c := 0; c < copies; c++ {
					cw.Add(1)
					go func(c int) {
						defer cw.Done()
						resps[c], errors[c] = n.svc.Append(ctx, req)
					}(c)
				}
				cw.Wait()
				originals := 0
				for c := 0; c < copies; c++ {
					if errors[c] != nil {
						errc <- errors[c]
						return
					}
					if !resps[c].GetDuplicate() {
						originals++
					}
					if !sameAppended(resps[c], resps[0]) {
						errc <- fmt.Errorf("copies of one turn answered differently: %v / %v", resps[c], resps[0])
						return
					}
				}
				if originals != 1 {
					errc <- fmt.Errorf("%d of %d copies claim to be the original", originals, copies)
					return
				}
				results[g] = append(results[g], sent{req, resps[0]})
			}
		}(g)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	total := 0
	for _, sid := range sessions {
		msgs := n.messages(t, sid)
		checkDense(t, msgs)
		total += len(msgs)
	}
	if total != senders*turns*2 {
		t.Fatalf("stored %d messages, want %d", total, senders*turns*2)
	}

	// Later, after reactivation: the store, not memory, recognises them.
	n.svc.PassivateAll()
	if err := session.WaitNoActors(ctx, n.svc); err != nil {
		t.Fatal(err)
	}
	before := session.Activations(n.svc)
	for _, rs := range results {
		for _, s := range rs {
			r, err := n.svc.Append(ctx, s.req)
			if err != nil {
				t.Fatal(err)
			}
			if !r.GetDuplicate() || !sameAppended(r, s.resp) {
				t.Fatalf("late retry answered %v, original %v", r, s.resp)
			}
		}
	}
	if session.Activations(n.svc) <= before {
		t.Fatal("late retries did not reactivate the session actors")
	}
	for _, sid := range sessions {
		if got := n.get(t, sid).GetMessageCount(); got != int64(senders*turns*2/len(sessions)) {
			t.Fatalf("session %s has %d messages after late retries", sid, got)
		}
	}
	// A turn that mixes stored and new ids is refused whole: the stored
	// id names another message.
	mixed := turnWithIDs(sessions[0], results[0][0].req.Messages[0].MessageId, ids.New())
	_, err := n.svc.Append(ctx, mixed)
	wantCode(t, err, errs.AlreadyExistsCode)
}

type accepted struct {
	session  string
	queued   int
	inFlight bool
}

// holdWrites takes the database's write lock from a connection of its own,
// so the writer's next transaction waits (within its busy timeout)
// until release is called.
func holdWrites(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Error(err)
			}
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(release) // also when the test fails while holding it
	return release
}

func waitAccepted(t *testing.T, ch <-chan accepted, sid string, queued int, inFlight bool) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case a := <-ch:
			if a.session != sid {
				continue
			}
			if a.queued != queued || a.inFlight != inFlight {
				t.Fatalf("accepted with %d queued, in flight %v; want %d, %v", a.queued, a.inFlight, queued, inFlight)
			}
			return
		case <-timeout:
			t.Fatal("the session actor did not accept the request")
		}
	}
}

// A retry that arrives while its original is in flight waits in the queue
// and is answered from the store; a retry queued together with its
// original rides in the same write and is recognised inside it.
func TestRetryWhileOriginalInFlight(t *testing.T) {
	path := fileURL(t)
	events := make(chan accepted, 64)
	n := startNode(t, path, session.Config{}, func(sid string, queued int, inFlight bool) {
		select {
		case events <- accepted{sid, queued, inFlight}:
		default:
		}
	})
	sid := n.create(t, "a")
	for len(events) > 0 {
		<-events // the create's
	}
	ask := func(req *sessionv1.AppendRequest) func() *sessionv1.AppendResponse {
		f := n.sys.Root.RequestFuture(n.svc.PID(), req, time30s)
		return func() *sessionv1.AppendResponse {
			r, err := f.Result()
			if err != nil {
				t.Fatal(err)
			}
			a, ok := r.(*sessionv1.AppendResponse)
			if !ok {
				t.Fatalf("append answered %T %v", r, r)
			}
			return a
		}
	}

	// Retry queued behind its own original, which is in flight.
	x := turnWithIDs(sid, ids.New(), ids.New())
	release := holdWrites(t, path)
	original := ask(x)
	waitAccepted(t, events, sid, 1, false)
	retry := ask(x)
	waitAccepted(t, events, sid, 1, true)
	release()
	o, r := original(), retry()
	if o.GetDuplicate() || !r.GetDuplicate() || !sameAppended(o, r) || o.GetMessages()[1].GetSequence() != 1 {
		t.Fatalf("original %v, retry %v", o, r)
	}

	// Original and retry both queued behind another write: one write
	// carries both, and the store finds the retry inside it.
	y := turnWithIDs(sid, ids.New())
	z := turnWithIDs(sid, ids.New(), ids.New())
	release = holdWrites(t, path)
	other := ask(y)
	waitAccepted(t, events, sid, 1, false)
	original = ask(z)
	waitAccepted(t, events, sid, 1, true)
	retry = ask(z)
	waitAccepted(t, events, sid, 2, true)
	release()
	if a := other(); a.GetMessages()[0].GetSequence() != 2 {
		t.Fatalf("other write answered %v", a)
	}
	o, r = original(), retry()
	if o.GetDuplicate() || !r.GetDuplicate() || !sameAppended(o, r) || o.GetMessages()[0].GetSequence() != 3 {
		t.Fatalf("original %v, retry %v", o, r)
	}
	msgs := n.messages(t, sid)
	checkDense(t, msgs)
	if len(msgs) != 5 {
		t.Fatalf("stored %d messages, want 5", len(msgs))
	}
}
