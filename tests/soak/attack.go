package soak

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	nodeclient "github.com/agentstate/agentstate/node/client"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Attacks sizes the hostile load. Zero fields turn an attack off.
type Attacks struct {
	// UnreadStreams AppendBatches streams send appends and never read an
	// outcome (issue 15: 40 of them killed a 1 GiB node).
	UnreadStreams int
	// Oversized callers each send appends of three 1 MiB messages, one
	// after another (issue 15: 300 at once killed a 2 GiB node).
	Oversized int
	// IdleStreams streams are opened on one connection and left idle,
	// ignoring the node's stream bound; IdleConns connections send the
	// HTTP/2 preface and nothing more.
	IdleStreams, IdleConns int
	// UnreadTails TailSession streams from sequence 0 on Session are
	// opened on one connection and never read (issue 26); needs Session.
	UnreadTails int
	// DeepImports callers send Imports of 200 KiB nesting 100,000 levels
	// deep, one after another (issue 26).
	DeepImports int
	// AuthFlood callers call with a wrong bearer token as fast as they
	// are answered.
	AuthFlood int
	// RemoteAddr is the node's Proto.Actor remote endpoint ("": no remote
	// attacks). Every RemoteEvery, one batch of RemoteSenders envelopes,
	// each naming another sender address, and one batch of RemoteReads
	// audit reads are sent to it.
	RemoteAddr                 string
	RemoteSenders, RemoteReads int
	RemoteEvery                time.Duration
	// Token is the node's bearer token, presented by every attack but
	// the auth flood: the hostile clients are authorized ones that
	// misbehave, so their requests reach the node's admission.
	Token string
	// Session is the session the hostile appends go to ("": a session id
	// that does not exist, answered NOT_FOUND after admission).
	Session string
}

// only keeps the attacks named in list (comma-separated: unread,
// oversized, idle, tails, deep, auth, remote); an empty list keeps them
// all.
func (a Attacks) only(list string) Attacks {
	if list == "" || list == "all" {
		return a
	}
	keep := make(map[string]bool)
	for _, name := range strings.Split(list, ",") {
		keep[strings.TrimSpace(name)] = true
	}
	if !keep["unread"] {
		a.UnreadStreams = 0
	}
	if !keep["oversized"] {
		a.Oversized = 0
	}
	if !keep["idle"] {
		a.IdleStreams, a.IdleConns = 0, 0
	}
	if !keep["tails"] {
		a.UnreadTails = 0
	}
	if !keep["deep"] {
		a.DeepImports = 0
	}
	if !keep["auth"] {
		a.AuthFlood = 0
	}
	if !keep["remote"] {
		a.RemoteAddr = ""
	}
	return a
}

// scaled is a with every count multiplied by f (one at least where a
// count was set): the same attacks, smaller.
func (a Attacks) scaled(f float64) Attacks {
	n := func(c int) int {
		if c == 0 {
			return 0
		}
		return max(1, int(float64(c)*f))
	}
	a.UnreadStreams, a.Oversized, a.IdleStreams, a.IdleConns = n(a.UnreadStreams), n(a.Oversized), n(a.IdleStreams), n(a.IdleConns)
	a.UnreadTails, a.DeepImports, a.AuthFlood = n(a.UnreadTails), n(a.DeepImports), n(a.AuthFlood)
	a.RemoteSenders, a.RemoteReads = n(a.RemoteSenders), n(a.RemoteReads)
	return a
}

// Tally counts what the attacks saw, by attack and outcome.
type Tally struct {
	mu sync.Mutex
	m  map[string]int64
}

func (t *Tally) add(key string, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]int64)
	}
	t.m[key] += n
}

// String lists the counts, sorted by key.
func (t *Tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.m))
	for k := range t.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, t.m[k])
	}
	return strings.TrimSpace(b.String())
}

// Run starts every attack of a against the node's gRPC API at addr and
// returns once ctx ends and every attacker has stopped.
func (a Attacks) Run(ctx context.Context, addr string, t *Tally) {
	var wg sync.WaitGroup
	spawn := func(n int, f func(ctx context.Context, i int)) {
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f(ctx, i)
			}()
		}
	}
	auth := nodeclient.DialOptions(nodeclient.Options{Token: a.Token})
	spawn(a.UnreadStreams, func(ctx context.Context, i int) { a.unreadStream(ctx, addr, auth, t) })
	spawn(a.Oversized, func(ctx context.Context, i int) { a.oversized(ctx, addr, auth, t) })
	if a.IdleStreams > 0 {
		spawn(1, func(ctx context.Context, _ int) { idleStreams(ctx, addr, a.IdleStreams, t) })
	}
	spawn(a.IdleConns, func(ctx context.Context, i int) { idleConn(ctx, addr, t) })
	if a.UnreadTails > 0 && a.Session != "" {
		spawn(1, func(ctx context.Context, _ int) { a.unreadTails(ctx, addr, auth, t) })
	}
	spawn(a.DeepImports, func(ctx context.Context, i int) { a.deepImports(ctx, addr, auth, t) })
	spawn(a.AuthFlood, func(ctx context.Context, i int) { authFlood(ctx, addr, t) })
	if a.RemoteAddr != "" {
		spawn(1, func(ctx context.Context, _ int) { a.remote(ctx, t) })
	}
	wg.Wait()
}

// missingSession is a well-formed session id that no session has.
var missingSession = ids.New()

func (a Attacks) appendReq(content int, messages int) *sessionv1.AppendRequest {
	sid := a.Session
	if sid == "" {
		sid = missingSession
	}
	r := &sessionv1.AppendRequest{SessionId: sid}
	body := strings.Repeat("x", content)
	for range messages {
		r.Messages = append(r.Messages, &sessionv1.NewMessage{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER, Content: body})
	}
	return r
}

// unreadStream opens AppendBatches streams that send batches and never
// read, each on a connection of its own with a fixed 64 KiB receive
// window (so that the node's sends block at once). When the node ends
// the stream (and closes the connection), it opens the next.
func (a Attacks) unreadStream(ctx context.Context, addr string, opts []grpc.DialOption, t *Tally) {
	for ctx.Err() == nil {
		conn, err := grpc.NewClient(addr, append(slices.Clip(opts),
			grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))...)
		if err != nil {
			t.add("unread:dial_error", 1)
			return
		}
		sctx, cancel := context.WithCancel(ctx)
		stream, err := sessionv1.NewSessionServiceClient(conn).AppendBatches(sctx)
		if err == nil {
			t.add("unread:streams", 1)
			for n := uint64(0); ; n += 64 {
				b := &sessionv1.AppendBatch{}
				for i := range uint64(64) {
					b.Appends = append(b.Appends, &sessionv1.TaggedAppend{Tag: n + i, Request: a.appendReq(512, 1)})
				}
				if err = stream.Send(b); err != nil {
					break
				}
				t.add("unread:appends_sent", 64)
			}
		}
		if ctx.Err() == nil {
			t.add("unread:ended_by_node", 1)
		}
		cancel()
		conn.Close()
		pause(ctx, 50*time.Millisecond) // before the next stream: a new connection, not a spin
	}
}

// oversized sends appends of three 1 MiB messages (3 MiB requests).
func (a Attacks) oversized(ctx context.Context, addr string, opts []grpc.DialOption, t *Tally) {
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.add("oversized:dial_error", 1)
		return
	}
	defer conn.Close()
	api := sessionv1.NewSessionServiceClient(conn)
	req := a.appendReq(1<<20-64, 3) // each message just inside the 1 MiB content limit
	for ctx.Err() == nil {
		for _, m := range req.Messages {
			m.MessageId = ids.New() // a new append each time, not a retry
		}
		_, err := api.Append(ctx, req)
		t.add("oversized:"+status.Code(err).String(), 1)
		if status.Code(err) == codes.Unavailable { // the connection broke: do not spin
			pause(ctx, 50*time.Millisecond)
		}
	}
}

// authFlood calls with a wrong token as fast as it is answered.
func authFlood(ctx context.Context, addr string, t *Tally) {
	conn, err := grpc.NewClient(addr, nodeclient.DialOptions(nodeclient.Options{Token: "not-the-token"})...)
	if err != nil {
		t.add("auth:dial_error", 1)
		return
	}
	defer conn.Close()
	api := sessionv1.NewSessionServiceClient(conn)
	for ctx.Err() == nil {
		_, err := api.Get(ctx, &sessionv1.GetSessionRequest{SessionId: missingSession})
		t.add("auth:"+status.Code(err).String(), 1)
	}
}

// remote sends, every RemoteEvery, a batch of envelopes of a type the
// node refuses, each naming another sender address (all on loopback, at
// the discard port, where nothing listens), and a batch of audit reads.
func (a Attacks) remote(ctx context.Context, t *Tally) {
	conn, err := grpc.NewClient(a.RemoteAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.add("remote:dial_error", 1)
		return
	}
	defer conn.Close()
	every := a.RemoteEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	for ctx.Err() == nil {
		if err := a.remoteRound(ctx, conn); err != nil {
			t.add("remote:failed_rounds", 1)
		} else {
			t.add("remote:rounds", 1)
		}
		pause(ctx, every)
	}
}

func (a Attacks) remoteRound(ctx context.Context, conn *grpc.ClientConn) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := remote.NewRemotingClient(conn).Receive(sctx)
	if err != nil {
		return err
	}
	// The remote protocol's handshake: the peer says who it is.
	if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "soak", Address: "127.0.0.1:9"}},
	}}}); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil {
		return err
	}
	if a.RemoteSenders > 0 {
		b := &remote.MessageBatch{TypeNames: []string{"agentstate.soak.v1.Refused"}, Targets: []*actor.PID{actor.NewPID(a.RemoteAddr, "sessions")}}
		for i := range a.RemoteSenders {
			b.Senders = append(b.Senders, actor.NewPID(fmt.Sprintf("127.%d.%d.%d:9", 1+i/65025, i/255%255, 1+i%254), "soak"))
			b.Envelopes = append(b.Envelopes, &remote.MessageEnvelope{Sender: int32(i + 1), MessageData: []byte{}})
		}
		if err := send(stream, b); err != nil {
			return err
		}
	}
	if a.RemoteReads > 0 {
		data, err := proto.Marshal(&auditv1.ListRequest{Limit: 1000})
		if err != nil {
			return err
		}
		b := &remote.MessageBatch{TypeNames: []string{string(proto.MessageName(&auditv1.ListRequest{}))},
			Targets: []*actor.PID{actor.NewPID(a.RemoteAddr, "audit")}}
		for range a.RemoteReads {
			b.Envelopes = append(b.Envelopes, &remote.MessageEnvelope{MessageData: data})
		}
		if err := send(stream, b); err != nil {
			return err
		}
	}
	return stream.CloseSend()
}

func send(stream remote.Remoting_ReceiveClient, b *remote.MessageBatch) error {
	return stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}})
}

// pause waits d or until ctx ends: pacing, not synchronization.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
