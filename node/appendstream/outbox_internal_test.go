package appendstream

import (
	"context"
	"sync"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
)

// sentMessages is a stream that records the messages sent on it; while
// gate is not nil, each Send first waits for a value from it.
type sentMessages struct {
	grpc.ServerStream // not used by the outbox
	mu                sync.Mutex
	msgs              [][]uint64 // each message's tags
	gate              chan struct{}
	entered           chan struct{} // one value per Send begun
}

func (s *sentMessages) Send(m *sessionv1.AppendOutcomes) error {
	s.entered <- struct{}{}
	if s.gate != nil {
		<-s.gate
	}
	var tags []uint64
	for _, o := range m.GetOutcomes() {
		tags = append(tags, o.GetTag())
	}
	s.mu.Lock()
	s.msgs = append(s.msgs, tags)
	s.mu.Unlock()
	return nil
}

func (s *sentMessages) Recv() (*sessionv1.AppendBatch, error) { select {} }

func (s *sentMessages) sent() [][]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]uint64(nil), s.msgs...)
}

// testOutbox is an outbox on s whose appends (n of them, each weighing
// size) took their place in the budget and in serving, as the receiver
// does before handing an append over.
func testOutbox(t *testing.T, s *sentMessages, n int, size int64) (*outbox, *sync.WaitGroup) {
	t.Helper()
	var serving sync.WaitGroup
	o := newOutbox(s, Limits{}.withDefaults(), &serving, func() { t.Error("stalled") })
	for range n {
		if err := o.budget.acquire(context.Background(), size); err != nil {
			t.Fatal(err)
		}
	}
	serving.Add(n)
	return o, &serving
}

func put(o *outbox, from, n int, size int64) {
	for i := range n {
		o.put(&sessionv1.TaggedOutcome{Tag: uint64(from + i)}, size)
	}
}

// wantAllGiveBack fails unless every outcome was counted out of serving
// and the whole budget is free again.
func wantAllGivenBack(t *testing.T, o *outbox, serving *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() { serving.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("serving not counted down to zero")
	}
	l := Limits{}.withDefaults()
	if !o.budget.appends.TryAcquire(int64(l.MaxAppends)) || !o.budget.bytes.TryAcquire(l.MaxBytes) {
		t.Fatal("the budget was not given back in full")
	}
}

// Outcomes decided together — queued before the sender gets to run, as
// those a commit decides are — travel in one message, each under its tag.
func TestOutboxSendsOutcomesQueuedTogetherInOneMessage(t *testing.T) {
	s := &sentMessages{entered: make(chan struct{}, 100)}
	o, serving := testOutbox(t, s, 64, 100)
	put(o, 0, 64, 100) // the sender is not running yet: all are queued
	go o.run()
	wantAllGivenBack(t, o, serving)
	msgs := s.sent()
	if len(msgs) != 1 || len(msgs[0]) != 64 {
		t.Fatalf("sent %d messages (%v), want one of 64 outcomes", len(msgs), msgs)
	}
	for i, tag := range msgs[0] {
		if tag != uint64(i) {
			t.Fatalf("outcome %d under tag %d, want %d", i, tag, i)
		}
	}
	o.close()
	<-o.exited
}

// Outcomes put while a send is under way go together in the next message;
// the sender does not hand them to another goroutine or wait for a wake.
func TestOutboxGathersOutcomesPutDuringASend(t *testing.T) {
	s := &sentMessages{entered: make(chan struct{}, 100), gate: make(chan struct{})}
	o, serving := testOutbox(t, s, 11, 10)
	go o.run()
	put(o, 0, 1, 10)
	<-s.entered // the first outcome's send is under way, held by gate
	put(o, 1, 10, 10)
	s.gate <- struct{}{}
	<-s.entered
	s.gate <- struct{}{}
	wantAllGivenBack(t, o, serving)
	msgs := s.sent()
	if len(msgs) != 2 || len(msgs[0]) != 1 || len(msgs[1]) != 10 {
		t.Fatalf("sent %v, want [0] then the 10 put during its send", msgs)
	}
	o.close()
	<-o.exited
}

// Once closed, the outbox sends nothing: what is queued and what is put
// later is dropped, and still counted out of serving and the budget.
func TestOutboxClosedDropsOutcomesAndGivesTheirRoomBack(t *testing.T) {
	s := &sentMessages{entered: make(chan struct{}, 100)}
	o, serving := testOutbox(t, s, 8, 10)
	put(o, 0, 3, 10)
	o.close()
	go o.run()
	<-o.exited
	put(o, 3, 5, 10)
	wantAllGivenBack(t, o, serving)
	if msgs := s.sent(); len(msgs) != 0 {
		t.Fatalf("sent %v after close, want nothing", msgs)
	}
}
