package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
)

// feedSub is one subscriber that survives node restarts: it keeps its
// cursor and what it received, and resumes from the cursor on whatever
// connection it is given.
type feedSub struct {
	name string
	// A session tail (session != "") or a change tail.
	session string
	types   []string
	closes  int // session_closed entries after which a change tail is done

	mu        sync.Mutex
	seqs      []int64 // session tail
	positions []int64 // change tail
	next      int64   // session: the next sequence; changes: the last position
	done      bool
}

// run follows the feed on conn until it is done (the session closed, or
// all closes seen) or the stream fails (the node died). progress is
// signalled after each event.
func (s *feedSub) run(ctx context.Context, conn *grpc.ClientConn, progress func()) error {
	api := feedv1.NewFeedServiceClient(conn)
	s.mu.Lock()
	from := s.next
	s.mu.Unlock()
	if s.session != "" {
		st, err := api.TailSession(ctx, &feedv1.TailSessionRequest{SessionId: s.session, FromSequence: from})
		if err != nil {
			return err
		}
		for {
			ev, err := st.Recv()
			if err != nil {
				return err
			}
			s.mu.Lock()
			switch x := ev.Event.(type) {
			case *feedv1.SessionEvent_Message:
				s.seqs = append(s.seqs, x.Message.GetSequence())
				s.next = x.Message.GetSequence() + 1
			case *feedv1.SessionEvent_Ended:
				s.done = x.Ended.GetReason() == feedv1.SessionEnded_REASON_CLOSED
			default:
				s.mu.Unlock()
				return fmt.Errorf("unexpected event %v", ev)
			}
			done := s.done
			s.mu.Unlock()
			progress()
			if done {
				return nil
			}
		}
	}
	st, err := api.TailChanges(ctx, &feedv1.TailChangesRequest{AfterPosition: from, Filter: &feedv1.ChangeFilter{EventTypes: s.types}})
	if err != nil {
		return err
	}
	for {
		ev, err := st.Recv()
		if err != nil {
			return err
		}
		e := ev.GetEntry()
		if e == nil {
			return fmt.Errorf("unexpected event %v", ev)
		}
		s.mu.Lock()
		s.positions = append(s.positions, e.GetPosition())
		s.next = e.GetPosition()
		if e.GetEventType() == "session_closed" {
			s.closes--
		}
		s.done = s.closes == 0
		done := s.done
		s.mu.Unlock()
		progress()
		if done {
			return nil
		}
	}
}

// TestFeedsResumeAfterKill9 is the crash test: writers append over
// gRPC while session tails and change tails follow; the node is killed
// with SIGKILL mid-stream and restarted on its database; every subscriber
// resumes from the last sequence or position it saw. Each one's whole
// view — before and after the kill — must equal the store's: nothing
// missed, nothing twice, in order.
func TestFeedsResumeAfterKill9(t *testing.T) {
	const sessions = 8
	n := startNode(t, "--audit-messages")
	ctx := ctxT(t)
	conn := n.conn()
	api := sessionv1.NewSessionServiceClient(conn)
	ids := make([]string, sessions)
	for i := range ids {
		r, err := api.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "crash"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.GetSession().GetSessionId()
	}
	var subs []*feedSub
	for i, id := range ids {
		subs = append(subs, &feedSub{name: fmt.Sprintf("session %d", i), session: id})
	}
	for i := 0; i < 4; i++ {
		s := &feedSub{name: fmt.Sprintf("changes %d", i), closes: sessions}
		if i%2 == 1 {
			s.types = []string{"message_appended", "session_closed"}
		}
		subs = append(subs, s)
	}

	// Phase 1: writers and subscribers run until every subscriber saw 20
	// events, then the node is killed mid-stream.
	var events sync.WaitGroup
	events.Add(len(subs))
	var subsDone sync.WaitGroup
	for _, s := range subs {
		subsDone.Add(1)
		seen := 0
		go func() {
			defer subsDone.Done()
			// The kill comes once every subscriber is well into live
			// delivery: 20 events each.
			s.run(ctx, conn, func() {
				if seen++; seen == 20 {
					events.Done()
				}
			})
		}()
	}
	wctx, stopWriters := context.WithCancel(ctx)
	var writers sync.WaitGroup
	for w := 0; w < 8; w++ {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for k := 0; wctx.Err() == nil; k++ {
				_, err := api.Append(wctx, &sessionv1.AppendRequest{SessionId: ids[(w+k)%sessions],
					Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: fmt.Sprintf("w%d k%d", w, k)}}})
				if err != nil {
					return // the node died (or the test is ending)
				}
			}
		}()
	}
	events.Wait()
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n.exited
	stopWriters()
	writers.Wait()
	subsDone.Wait()
	for _, s := range subs {
		t.Logf("%s: cursor %d at the kill", s.name, s.next)
	}

	// Phase 2: restart on the same database; every subscriber resumes
	// from its cursor; more appends, then every session is closed, which
	// ends the session tails and is the change tails' last event.
	n2 := startNodeOn(t, n.dir, "--audit-messages")
	conn2 := n2.conn()
	api2 := sessionv1.NewSessionServiceClient(conn2)
	errs := make(chan error, len(subs))
	for _, s := range subs {
		subsDone.Add(1)
		go func() {
			defer subsDone.Done()
			if err := s.run(ctx, conn2, func() {}); err != nil {
				errs <- fmt.Errorf("%s after the restart: %w", s.name, err)
			}
		}()
	}
	for i, id := range ids {
		for k := 0; k < 3; k++ {
			if _, err := api2.Append(ctx, &sessionv1.AppendRequest{SessionId: id,
				Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_ASSISTANT, Content: fmt.Sprintf("after %d %d", i, k)}}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := api2.Close(ctx, &sessionv1.CloseSessionRequest{SessionId: id}); err != nil {
			t.Fatal(err)
		}
	}
	subsDone.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Every view equals the store's.
	entries := storedAudit(t, ctx, auditv1.NewAuditServiceClient(conn2))
	for _, s := range subs {
		if s.session != "" {
			want := storedSeqs(t, ctx, api2, s.session)
			if !slices.Equal(s.seqs, want) {
				t.Errorf("%s: delivered %d sequences %v, store has %d", s.name, len(s.seqs), clip(s.seqs), len(want))
			}
			continue
		}
		var want []int64
		for _, e := range entries {
			if len(s.types) == 0 || slices.Contains(s.types, e.GetEventType()) {
				want = append(want, e.GetPosition())
			}
		}
		if !slices.Equal(s.positions, want) {
			t.Errorf("%s: delivered %d positions, store has %d", s.name, len(s.positions), len(want))
		}
	}
	if code := n2.terminate(60 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}

func clip(s []int64) []int64 { return s[:min(len(s), 20)] }

func storedSeqs(t *testing.T, ctx context.Context, api sessionv1.SessionServiceClient, id string) []int64 {
	t.Helper()
	var out []int64
	for {
		r, err := api.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: id, FromSequence: int64(len(out)), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetMessages()) == 0 {
			return out
		}
		for _, m := range r.GetMessages() {
			out = append(out, m.GetSequence())
		}
	}
}

func storedAudit(t *testing.T, ctx context.Context, api auditv1.AuditServiceClient) []*auditv1.AuditEntry {
	t.Helper()
	var out []*auditv1.AuditEntry
	req := &auditv1.ListRequest{Limit: 1000}
	for {
		r, err := api.List(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.GetEntries()...)
		if req.AfterEventId = r.GetNextCursor(); req.AfterEventId == "" {
			return out
		}
	}
}

// A node stopping with SIGTERM ends every feed stream cleanly: the last
// event is NODE_STOPPING, after every committed change, and the stream
// ends without an error.
func TestFeedsEndCleanlyOnSIGTERM(t *testing.T) {
	n := startNode(t, "--audit-messages")
	ctx := ctxT(t)
	conn := n.conn()
	api := sessionv1.NewSessionServiceClient(conn)
	r, err := api.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "term"})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetSession().GetSessionId()
	st, err := feedv1.NewFeedServiceClient(conn).TailSession(ctx, &feedv1.TailSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	ct, err := feedv1.NewFeedServiceClient(conn).TailChanges(ctx, &feedv1.TailChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 10; k++ {
		if _, err := api.Append(ctx, &sessionv1.AppendRequest{SessionId: id,
			Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "x"}}}); err != nil {
			t.Fatal(err)
		}
	}
	exited := make(chan int, 1)
	go func() { exited <- n.terminate(60 * time.Second) }()
	var seqs []int64
	var reason feedv1.SessionEnded_Reason
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("session tail: %v", err)
		}
		if m := ev.GetMessage(); m != nil {
			seqs = append(seqs, m.GetSequence())
		}
		if e := ev.GetEnded(); e != nil {
			reason = e.GetReason()
		}
	}
	var entries int
	var ended bool
	for {
		ev, err := ct.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("change tail: %v", err)
		}
		if ev.GetEntry() != nil {
			entries++
		}
		ended = ended || ev.GetEnded() != nil
	}
	if len(seqs) != 10 || reason != feedv1.SessionEnded_REASON_NODE_STOPPING {
		t.Fatalf("session tail: %d messages, ended %v", len(seqs), reason)
	}
	if entries != 11 || !ended { // session_created and ten message_appended
		t.Fatalf("change tail: %d entries, ended %v", entries, ended)
	}
	if code := <-exited; code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}
