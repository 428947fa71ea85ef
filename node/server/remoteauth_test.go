package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/writer"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// A peer's senders are at the address it declared: an envelope naming any
// other sender is dropped and nobody is answered, so that a batch naming
// thousands of addresses makes the node dial none of them (each reply to a
// new address costs the library a connection and goroutines, forever).
func TestGuardAnswersNoSenderButThePeer(t *testing.T) {
	g, replies := newTestGuard()
	b := &remote.MessageBatch{TypeNames: []string{"agentstate.evil.v1.Unknown", "agentstate.session.v1.GetSessionRequest"},
		Targets: []*actor.PID{{Address: nodeAddr, Id: "sessions"}}}
	const n = 5000
	for i := 0; i < n; i++ {
		b.Senders = append(b.Senders, &actor.PID{Address: fmt.Sprintf("10.%d.%d.1:%d", i/250, i%250, 1000+i), Id: "future$1"})
		b.Envelopes = append(b.Envelopes, &remote.MessageEnvelope{TypeId: int32(i % 2), Sender: int32(i + 1), SenderRequestId: 7,
			MessageData: mustMarshal(t, &sessionv1.GetSessionRequest{SessionId: "x"})})
	}
	if err := g.screen(b, peerAddr); err != nil {
		t.Fatal(err)
	}
	if len(b.Envelopes) != 0 || len(*replies) != 0 {
		t.Fatalf("kept %d envelopes, answered %d senders; want 0 and 0", len(b.Envelopes), len(*replies))
	}
	if got := counterValue(t, g.m.remoteRejected.WithLabelValues("sender_not_peer")); got != n {
		t.Fatalf("rejected{reason=sender_not_peer} = %v, want %d", got, n)
	}
}

// A stream declares its peer once; a second, different address ends it.
func TestGuardedStreamDeclaresItsPeerOnce(t *testing.T) {
	g, _ := newTestGuard()
	ss := &fakeStream{msgs: []*remote.RemoteMessage{connectRequest(peerAddr), connectRequest(peerAddr), connectRequest("10.0.0.1:1")}}
	gs := &guardedStream{ServerStream: ss, g: g}
	var m remote.RemoteMessage
	for i := 0; i < 2; i++ {
		if err := gs.RecvMsg(&m); err != nil {
			t.Fatalf("connect request %d: %v", i, err)
		}
	}
	if err := gs.RecvMsg(&m); status.Code(err) != codes.InvalidArgument || gs.peer != peerAddr {
		t.Fatalf("a second peer address: %v (peer %q), want INVALID_ARGUMENT and the first kept", err, gs.peer)
	}
}

// A peer that declares this node's own address is refused: its requests'
// answers would go to the node's own futures.
func TestGuardedStreamRefusesAPeerClaimingTheNodesAddress(t *testing.T) {
	g, _ := newTestGuard()
	gs := &guardedStream{ServerStream: &fakeStream{msgs: []*remote.RemoteMessage{connectRequest(nodeAddr)}}, g: g}
	var m remote.RemoteMessage
	if err := gs.RecvMsg(&m); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a peer at the node's address: %v, want INVALID_ARGUMENT", err)
	}
}

// In cluster mode, a reply to one of this node's futures is delivered only
// from the member the request went to, once; replies to futures that sent
// nothing, or from anybody else, are forgeries (future ids are a counter).
func TestGuardDeliversRepliesOnlyFromTheRequestee(t *testing.T) {
	g, replies := newTestGuard()
	g.cluster = true
	g.sent = newSentRequests(time.Minute, 100)
	const member, other = "127.0.0.1:7001", "127.0.0.1:7002"
	g.sent.record("future$5", member)

	reply := func(future, from string) int {
		b := &remote.MessageBatch{TypeNames: []string{"agentstate.session.v1.AppendResponse"},
			Targets:   []*actor.PID{{Address: nodeAddr, Id: future}},
			Envelopes: []*remote.MessageEnvelope{{MessageData: mustMarshal(t, &sessionv1.AppendResponse{NextSequence: 41})}}}
		if err := g.screen(b, from); err != nil {
			t.Fatal(err)
		}
		return len(b.Envelopes)
	}
	if reply("future$5", other) != 0 {
		t.Fatal("a reply from a member the request did not go to was delivered")
	}
	if reply("future$6", member) != 0 {
		t.Fatal("a reply to a future that sent nothing was delivered")
	}
	if reply("future$5", member) != 1 {
		t.Fatal("the requestee's reply was dropped")
	}
	if reply("future$5", member) != 0 {
		t.Fatal("a second reply to the same request was delivered")
	}
	if got := counterValue(t, g.m.remoteRejected.WithLabelValues("reply_not_from_requestee")); got != 3 {
		t.Fatalf("rejected{reason=reply_not_from_requestee} = %v, want 3", got)
	}
	if len(*replies) != 0 {
		t.Fatalf("%d answers to replies, want none", len(*replies))
	}
}

// The record is taken from the batches the remote sends: a local future
// sending to a member records the member; other senders record nothing.
func TestSentRequestsRecordsTheFuturesOfOutgoingBatches(t *testing.T) {
	r := newSentRequests(time.Minute, 100)
	var sentOn grpc.ClientStream = &fakeClientStream{}
	ic := r.clientInterceptor(func() string { return nodeAddr })
	cs, err := ic(context.Background(), &grpc.StreamDesc{}, nil, "/remote.Remoting/Receive",
		func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
			return sentOn, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	b := &remote.MessageBatch{
		TypeNames: []string{"agentstate.session.v1.AppendRequest"},
		Targets:   []*actor.PID{{Address: "127.0.0.1:7001", Id: "partition-activator/s$1"}},
		Senders:   []*actor.PID{{Address: nodeAddr, Id: "future$9"}, {Address: nodeAddr, Id: "sessions"}, {Address: "127.0.0.1:7003", Id: "future$10"}},
		Envelopes: []*remote.MessageEnvelope{{Sender: 1}, {Sender: 2}, {Sender: 3}, {Sender: 0}},
	}
	if err := cs.SendMsg(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}); err != nil {
		t.Fatal(err)
	}
	if !r.answeredBy("future$9", "127.0.0.1:7001") {
		t.Fatal("the future's request was not recorded")
	}
	for _, id := range []string{"sessions", "future$10"} {
		if r.answeredBy(id, "127.0.0.1:7001") {
			t.Fatalf("%s was recorded", id)
		}
	}
	if sentOn.(*fakeClientStream).sent != 1 {
		t.Fatal("the batch was not sent on")
	}
}

// The record stays bounded: past maxEntries it rotates, and what was
// rotated out twice is forgotten.
func TestSentRequestsStaysBounded(t *testing.T) {
	r := newSentRequests(time.Hour, 10)
	for i := 0; i < 1000; i++ {
		r.record(fmt.Sprintf("future$%d", i), "127.0.0.1:7001")
	}
	r.mu.Lock()
	n := len(r.cur) + len(r.prev)
	r.mu.Unlock()
	if n > 20 {
		t.Fatalf("%d records kept, want at most 20", n)
	}
	if r.answeredBy("future$0", "127.0.0.1:7001") || !r.answeredBy("future$999", "127.0.0.1:7001") {
		t.Fatal("want the oldest forgotten and the newest kept")
	}
}

type fakeClientStream struct {
	grpc.ClientStream
	sent int
}

func (s *fakeClientStream) SendMsg(any) error { s.sent++; return nil }

// lineCapture is a slog handler that keeps each record.
type lineCapture struct {
	mu    sync.Mutex
	recs  []slog.Record
	added chan struct{}
}

func (c *lineCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *lineCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r)
	c.mu.Unlock()
	select {
	case c.added <- struct{}{}:
	default:
	}
	return nil
}
func (c *lineCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *lineCapture) WithGroup(string) slog.Handler      { return c }

func (c *lineCapture) records() []slog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]slog.Record(nil), c.recs...)
}

// A flood of one kind of WARN line writes the burst, then one line with
// the count of the rest.
func TestWarnLimiterSuppressesAndCounts(t *testing.T) {
	c := &lineCapture{added: make(chan struct{}, 1)}
	l := newWarnLimiter(slog.New(c), "remote: dropped a message", 50*time.Millisecond, 3)
	const n = 10000
	for i := 0; i < n; i++ {
		l.Warn("i", i)
	}
	// Whether the flood outlasted a window depends on the machine; the
	// lines written plus the counts suppressed must account for every
	// call, and once the last window ends its summary is written.
	deadline := time.After(10 * time.Second)
	for {
		lines, suppressed, pending := 0, int64(0), false
		for _, r := range c.records() {
			lines++
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "suppressed" {
					lines--
					suppressed += a.Value.Int64()
				}
				return true
			})
		}
		l.mu.Lock()
		pending = l.timer != nil
		l.mu.Unlock()
		if !pending && int64(lines)+suppressed == n {
			if lines > n/100 || suppressed == 0 {
				t.Fatalf("%d lines written, %d suppressed: the flood was not limited", lines, suppressed)
			}
			return
		}
		select {
		case <-c.added:
		case <-deadline:
			t.Fatalf("after the flood: %d lines, %d suppressed, summary pending %v; want them to account for %d", lines, suppressed, pending, n)
		}
	}
}

// A flood of unauthenticated calls writes a few WARN lines and a count of
// the rest, not one line per call (which filled the log at megabytes a
// second); the metric still counts every one.
func TestAuthRefusalsAreRateLimited(t *testing.T) {
	c := &lineCapture{added: make(chan struct{}, 1)}
	m := newMetrics()
	fa := newFailureAuditor(&fakeRecorder{}, writer.NoWait, m, quietLog())
	defer fa.close()
	tp := newStreamTap(newAuthenticator("s3cret", fa, m, slog.New(c)), 0, m, quietLog())
	const n = 2000
	for i := 0; i < n; i++ {
		info := &tap.Info{FullMethodName: "/x/Y", Header: metadata.Pairs("authorization", "Bearer wrong")}
		if _, err := tp.handle(context.Background(), info); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("call %d: %v, want UNAUTHENTICATED", i, err)
		}
	}
	if got := counterValue(t, m.authFailures); got != n {
		t.Fatalf("auth failures counted %v, want %d", got, n)
	}
	if lines := len(c.records()); lines > n/10 {
		t.Fatalf("%d WARN lines for %d refusals: not rate-limited", lines, n)
	}
}
