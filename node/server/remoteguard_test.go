package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const (
	nodeAddr = "127.0.0.1:9000"
	// peerAddr is the address the test peer declares and its senders'.
	peerAddr = "127.0.0.1:9999"
)

type sent struct {
	to  *actor.PID
	msg proto.Message
}

func newTestGuard() (*remoteGuard, *[]sent) {
	var replies []sent
	g := &remoteGuard{
		exposed:   map[string]bool{"sessions": true, "plans": true, "audit": true},
		localAddr: func() string { return nodeAddr },
		reply:     func(to *actor.PID, msg proto.Message) { replies = append(replies, sent{to, msg}) },
		m:         newMetrics(),
		log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	g.drops = newWarnLimiter(g.log, "remote: dropped a message", warnWindow, warnBurst)
	g.closes = newWarnLimiter(g.log, "remote: closed a stream", warnWindow, warnBurst)
	return g, &replies
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// batch is a well-formed batch: envelope i has type names[i] and targets
// targets[i]; every envelope has the sender peer/$f1 with request id 7.
func batch(t *testing.T, names []string, targets []string) *remote.MessageBatch {
	b := &remote.MessageBatch{Senders: []*actor.PID{{Address: peerAddr, Id: "future$1"}}}
	for i := range names {
		b.TypeNames = append(b.TypeNames, names[i])
		b.Targets = append(b.Targets, &actor.PID{Address: nodeAddr, Id: targets[i]})
		b.Envelopes = append(b.Envelopes, &remote.MessageEnvelope{
			TypeId: int32(i), Target: int32(i), Sender: 1, SenderRequestId: 7,
			MessageData: mustMarshal(t, &sessionv1.GetSessionRequest{SessionId: "x"}),
		})
	}
	return b
}

func TestGuardKeepsAllowedMessages(t *testing.T) {
	g, replies := newTestGuard()
	b := batch(t, []string{"agentstate.session.v1.GetSessionRequest", "agentstate.plan.v1.HistoryRequest"}, []string{"sessions", "plans"})
	if err := g.screen(b, peerAddr); err != nil {
		t.Fatalf("screen: %v", err)
	}
	if len(b.Envelopes) != 2 || len(*replies) != 0 {
		t.Fatalf("kept %d envelopes, sent %d replies; want 2 and 0", len(b.Envelopes), len(*replies))
	}
}

// TestGuardDropsWhatItMustNotDeliver covers each refusal: a type this
// binary does not link (the crash of the unguarded library), a system
// message that would stop an actor, a target that is not exposed, and a
// target at another address (which would make the node a relay).
func TestGuardDropsWhatItMustNotDeliver(t *testing.T) {
	cases := []struct {
		name, typeName, target string
		targetAddr             string
		reason                 string
	}{
		{"unknown type", "agentstate.evil.v1.Unknown", "sessions", nodeAddr, "unknown_type"},
		{"poison pill", "actor.PoisonPill", "sessions", nodeAddr, "type_not_allowed"},
		{"system stop", "actor.Stop", "audit", nodeAddr, "type_not_allowed"},
		{"activator", "remote.ActorPidRequest", "activator", nodeAddr, "type_not_allowed"},
		{"hidden actor", "agentstate.session.v1.GetSessionRequest", "sessions/$1", nodeAddr, "target_not_exposed"},
		{"relay", "agentstate.session.v1.GetSessionRequest", "sessions", "10.0.0.1:1", "target_not_exposed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, replies := newTestGuard()
			b := batch(t, []string{tc.typeName, "agentstate.session.v1.GetSessionRequest"}, []string{tc.target, "sessions"})
			b.Targets[0].Address = tc.targetAddr
			if err := g.screen(b, peerAddr); err != nil {
				t.Fatalf("screen: %v (a bad envelope must not end the stream)", err)
			}
			if len(b.Envelopes) != 1 || b.TypeNames[b.Envelopes[0].TypeId] != "agentstate.session.v1.GetSessionRequest" {
				t.Fatalf("kept %v; want only the allowed envelope", b.Envelopes)
			}
			if got := counterValue(t, g.m.remoteRejected.WithLabelValues(tc.reason)); got != 1 {
				t.Fatalf("rejected{reason=%s} = %v, want 1", tc.reason, got)
			}
			if len(*replies) != 1 {
				t.Fatalf("%d replies, want 1 (the sender's request must fail fast)", len(*replies))
			}
			r := (*replies)[0]
			e, ok := r.msg.(*commonv1.Error)
			if !ok || e.GetCode() != commonv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT || r.to.GetRequestId() != 7 || r.to.GetId() != "future$1" {
				t.Fatalf("reply %v to %v; want INVALID_ARGUMENT to future$1 with request id 7", r.msg, r.to)
			}
		})
	}
}

func TestGuardNeverAnswersItself(t *testing.T) {
	g, replies := newTestGuard()
	b := batch(t, []string{"agentstate.evil.v1.Unknown"}, []string{"sessions"})
	b.Senders[0].Address = nodeAddr
	if err := g.screen(b, nodeAddr); err != nil {
		t.Fatal(err)
	}
	if len(b.Envelopes) != 0 || len(*replies) != 0 {
		t.Fatalf("kept %d, replied %d; want 0 and 0", len(b.Envelopes), len(*replies))
	}
}

// TestGuardEndsMalformedStreams: each of these would index out of range or
// dereference nil in the library's reader.
func TestGuardEndsMalformedStreams(t *testing.T) {
	cases := map[string]func(b *remote.MessageBatch){
		"type id past the table":  func(b *remote.MessageBatch) { b.Envelopes[0].TypeId = 5 },
		"negative type id":        func(b *remote.MessageBatch) { b.Envelopes[0].TypeId = -1 },
		"target past the table":   func(b *remote.MessageBatch) { b.Envelopes[0].Target = 3 },
		"sender past the table":   func(b *remote.MessageBatch) { b.Envelopes[0].Sender = 2 },
		"json serializer":         func(b *remote.MessageBatch) { b.Envelopes[0].SerializerId = 1 },
		"unregistered serializer": func(b *remote.MessageBatch) { b.Envelopes[0].SerializerId = 42 },
		"nil target pid":          func(b *remote.MessageBatch) { b.Targets[0] = nil },
		"nil sender pid":          func(b *remote.MessageBatch) { b.Senders[0] = nil },
		"nil envelope":            func(b *remote.MessageBatch) { b.Envelopes[0] = nil },
	}
	for name, corrupt := range cases {
		t.Run(name, func(t *testing.T) {
			g, _ := newTestGuard()
			b := batch(t, []string{"agentstate.session.v1.GetSessionRequest"}, []string{"sessions"})
			corrupt(b)
			err := g.screen(b, peerAddr)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("screen = %v, want INVALID_ARGUMENT", err)
			}
		})
	}
}

// connectRequest is the first message of a peer's stream: it declares the
// peer's address.
func connectRequest(addr string) *remote.RemoteMessage {
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "peer", Address: addr}},
	}}}
}

// fakeStream hands out queued RemoteMessages.
type fakeStream struct {
	msgs []*remote.RemoteMessage
}

func (s *fakeStream) RecvMsg(m any) error {
	if len(s.msgs) == 0 {
		return io.EOF
	}
	proto.Merge(m.(*remote.RemoteMessage), s.msgs[0])
	s.msgs = s.msgs[1:]
	return nil
}
func (s *fakeStream) SendMsg(any) error            { return nil }
func (s *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (s *fakeStream) SendHeader(metadata.MD) error { return nil }
func (s *fakeStream) SetTrailer(metadata.MD)       {}
func (s *fakeStream) Context() context.Context     { return context.Background() }
func (s *fakeStream) String() string               { return "fakeStream" }

// TestGuardedStreamScreensBeforeTheHandler runs the interceptor chain the
// remote server uses around a handler that does what the library's reader
// does with an envelope: resolve its type and dereference it. Unguarded,
// the unknown type is a nil dereference; guarded, the handler never sees it.
func TestGuardedStreamScreensBeforeTheHandler(t *testing.T) {
	g, _ := newTestGuard()
	b := batch(t, []string{"agentstate.evil.v1.Unknown", "agentstate.session.v1.GetSessionRequest"}, []string{"sessions", "sessions"})
	ss := &fakeStream{msgs: []*remote.RemoteMessage{connectRequest(peerAddr), {MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}}}
	var delivered []string
	handler := func(_ any, stream grpc.ServerStream) error {
		for {
			var m remote.RemoteMessage
			if err := stream.RecvMsg(&m); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			mb := m.GetMessageBatch()
			if mb == nil {
				continue // the connect request
			}
			for _, env := range mb.Envelopes {
				v, err := remote.Deserialize(env.MessageData, mb.TypeNames[env.TypeId], env.SerializerId)
				if err != nil {
					return err
				}
				delivered = append(delivered, string(proto.MessageName(v.(proto.Message))))
			}
		}
	}
	info := &grpc.StreamServerInfo{FullMethod: "/remote.Remoting/Receive"}
	err := recoverStream(g.m, "remote", g.log)(nil, ss, info, func(srv any, ss grpc.ServerStream) error {
		return g.streamInterceptor(srv, ss, info, handler)
	})
	if err != nil {
		t.Fatalf("stream ended with %v", err)
	}
	if len(delivered) != 1 || delivered[0] != "agentstate.session.v1.GetSessionRequest" {
		t.Fatalf("delivered %v; want only the known request", delivered)
	}
}

// TestRecoverStreamKeepsTheProcess: the backstop turns a panic on the
// stream's goroutine into INTERNAL for that stream.
func TestRecoverStreamKeepsTheProcess(t *testing.T) {
	g, _ := newTestGuard()
	info := &grpc.StreamServerInfo{FullMethod: "/remote.Remoting/Receive"}
	err := recoverStream(g.m, "remote", g.log)(nil, &fakeStream{}, info, func(any, grpc.ServerStream) error {
		var p *actor.PID
		_ = p.Id // the library's nil-pointer crash, in miniature
		return nil
	})
	if status.Code(err) != codes.Internal {
		t.Fatalf("err = %v, want INTERNAL", err)
	}
	if got := counterValue(t, g.m.recoveredPanics.WithLabelValues("remote")); got != 1 {
		t.Fatalf("recovered panics = %v, want 1", got)
	}
}

func TestGuardRefusesTheUnimplementedUnaryMethods(t *testing.T) {
	g, _ := newTestGuard()
	called := false
	_, err := g.unaryInterceptor(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/remote.Remoting/ListProcesses"},
		func(context.Context, any) (any, error) { called = true; panic("implement me") })
	if called || status.Code(err) != codes.Unimplemented {
		t.Fatalf("called=%v err=%v; want the handler skipped and UNIMPLEMENTED", called, err)
	}
}

// A refused type name longer than the clip, whose clip point falls inside
// a multi-byte character, still gets a reply that marshals (a proto3
// string must be UTF-8; a reply that does not marshal is never sent).
func TestGuardAnswersWhenTheClipEndsInsideACharacter(t *testing.T) {
	for pad := 0; pad < 4; pad++ {
		// Type names and targets: the clip point lands on each byte of "é" and "€".
		name := typePrefix + strings.Repeat("a", 120-len(typePrefix)-pad) + strings.Repeat("é€", 40)
		for _, tc := range []struct{ typeName, target string }{
			{name, "sessions"},
			{"agentstate.session.v1.GetSessionRequest", strings.Repeat("b", 120-len(nodeAddr)-1-pad) + strings.Repeat("€", 40)},
		} {
			g, replies := newTestGuard()
			b := batch(t, []string{tc.typeName}, []string{tc.target})
			if err := g.screen(b, peerAddr); err != nil {
				t.Fatal(err)
			}
			if len(*replies) != 1 {
				t.Fatalf("pad %d: %d replies, want 1", pad, len(*replies))
			}
			e := (*replies)[0].msg.(*commonv1.Error)
			if _, err := proto.Marshal(e); err != nil || !utf8.ValidString(e.GetMessage()) {
				t.Fatalf("pad %d: the reply %q does not marshal: %v", pad, e.GetMessage(), err)
			}
		}
	}
}

// An envelope whose data is not a message of its type (bytes that do not
// parse, a string that is not UTF-8) is refused alone, with an
// INVALID_ARGUMENT reply: delivered, the library's reader would end the
// whole stream on it, answering nobody.
func TestGuardRefusesUndecodableData(t *testing.T) {
	for name, data := range map[string][]byte{
		"garbage":       {0x0a, 0x05, 'x'},
		"invalid UTF-8": {0x0a, 0x01, 0xff}, // session_id = "\xff"
	} {
		t.Run(name, func(t *testing.T) {
			g, replies := newTestGuard()
			b := batch(t, []string{"agentstate.session.v1.GetSessionRequest", "agentstate.session.v1.GetSessionRequest"}, []string{"sessions", "sessions"})
			b.Envelopes[0].MessageData = data
			if err := g.screen(b, peerAddr); err != nil {
				t.Fatalf("screen: %v (one bad envelope must not end the stream)", err)
			}
			if len(b.Envelopes) != 1 || b.Envelopes[0].TypeId != 1 {
				t.Fatalf("kept %v; want only the decodable envelope", b.Envelopes)
			}
			if got := counterValue(t, g.m.remoteRejected.WithLabelValues("undecodable")); got != 1 {
				t.Fatalf("rejected{reason=undecodable} = %v, want 1", got)
			}
			if len(*replies) != 1 {
				t.Fatalf("%d replies, want 1", len(*replies))
			}
			e, ok := (*replies)[0].msg.(*commonv1.Error)
			if !ok || e.GetCode() != commonv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT || !strings.Contains(e.GetMessage(), "could not be decoded") {
				t.Fatalf("reply %v, want INVALID_ARGUMENT saying the request could not be decoded", (*replies)[0].msg)
			}
		})
	}
}

// While the endpoint shuts down (it holds quiesce), a stream's receive
// ends the stream as UNAVAILABLE at once, neither waiting for the
// shutdown nor handing the library's reader another message.
func TestGuardedStreamEndsWhileShuttingDown(t *testing.T) {
	g, _ := newTestGuard()
	b := batch(t, []string{"agentstate.session.v1.GetSessionRequest"}, []string{"sessions"})
	ss := &fakeStream{msgs: []*remote.RemoteMessage{{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}}}
	gs := &guardedStream{ServerStream: ss, g: g}
	g.quiesce.Lock()
	var m remote.RemoteMessage
	err := gs.RecvMsg(&m)
	g.quiesce.Unlock()
	if status.Code(err) != codes.Unavailable || len(ss.msgs) != 1 {
		t.Fatalf("RecvMsg while shutting down = %v with %d messages left; want UNAVAILABLE and the message unread", err, len(ss.msgs))
	}
	if err := gs.RecvMsg(&m); err != nil || m.GetMessageBatch() == nil {
		t.Fatalf("RecvMsg outside a shutdown = %v, %v", err, &m)
	}
}
