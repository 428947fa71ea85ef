package server

import (
	"context"
	"crypto/x509"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/agentstate/agentstate/actors/fairshare"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// The Proto.Actor remote endpoint of this module version trusts its peers:
// its reader (remote/endpoint_reader.go, onMessageBatch) indexes the batch's
// type, target and sender tables with peer-supplied numbers, looks up the
// peer-named protobuf type and dereferences the result without checking it
// (proto_serializer.go: a type this binary does not link is a nil-pointer
// panic), and delivers system messages (Stop, Watch) and PoisonPill to any
// local actor. All of that runs on the gRPC stream handler's goroutine, so
// one bad batch would kill the node.
//
// remoteGuard screens every batch before the reader sees it, by wrapping
// the server stream's RecvMsg:
//   - a batch whose tables do not match its envelopes (an index out of
//     range, a nil PID) or that names a serializer other than protobuf ends
//     the stream with INVALID_ARGUMENT: the peer is broken or hostile;
//   - an envelope whose type is not an agentstate message this binary links,
//     whose target is not one of the exposed actors at this node's
//     address, or whose data is not a message of its type, is dropped; its
//     sender, if any, is answered with an INVALID_ARGUMENT commonv1.Error,
//     so a request does not hang, but only when the sender is at the
//     stream's peer address (below): a dropped envelope never makes the
//     node dial anywhere new;
//   - an envelope whose sender is not at the address the peer declared when
//     it opened the stream (its ConnectRequest) is dropped unanswered: every
//     reply the node sends to a sender means a connection to the sender's
//     address, and a peer's own actors are at its own address, so anything
//     else would let one batch make the node dial thousands of hosts (each
//     dial costs the library a client connection and ~16 goroutines, kept
//     forever);
//   - in cluster mode, a reply to one of this node's futures is delivered
//     only from the peer the request went to (see sentRequests): the future
//     ids are a predictable counter, so anybody else's "reply" is a forgery.
//
// Which peers may open a stream at all is the transport's business: mutual
// TLS with the cluster's CA (checkRemoteSecurity refuses to start a
// non-loopback endpoint without it).
//
// A recovering interceptor stays underneath as the backstop: a panic on the
// stream's goroutine ends that stream, not the process. The remote's two
// unary methods (ListProcesses, GetProcessDiagnostics) panic
// "implement me" in this version and are refused as UNIMPLEMENTED.
type remoteGuard struct {
	// exposed are the actor ids peers may address ("sessions", "plans",
	// "audit").
	exposed map[string]bool
	// localAddr returns this node's remote address (targets must name it:
	// anything else would make the node relay to another host).
	localAddr func() string
	// reply answers the sender of a dropped request.
	reply func(to *actor.PID, msg proto.Message)
	// cluster admits, besides, the traffic of a Proto.Actor cluster
	// member (see clusterTraffic).
	cluster bool
	// sent are the requests this node's futures sent to peers (cluster
	// mode: the replies it will accept).
	sent *sentRequests
	m    *metrics
	log  *slog.Logger
	// drops and closes write the WARN lines of dropped envelopes and
	// closed streams, rate-limited: a flood must not flood the log.
	drops, closes *warnLimiter

	// quiesce orders the stream handlers' reads of the library's reader
	// state before the write of its graceful Shutdown (which sets a flag
	// the handlers read unsynchronized): a handler passes it (a read lock,
	// at once released) before and after each receive, and the endpoint's
	// Shutdown holds it. A handler that cannot pass ends its stream as
	// UNAVAILABLE instead of waiting: the node is going away.
	quiesce sync.RWMutex

	// authz decides each request as the principal of its peer's
	// certificate, once the node has identities (remoteauthz.go).
	authz remoteAuthzSlot
	// pending are the node's identities until authz is set: a peer whose
	// certificate names a principal is refused meanwhile.
	pending *identities
	// pace, once set (a plain remote endpoint of a node with identities),
	// holds the peers to their share of the node's work rate.
	pace atomic.Pointer[fairshare.Pacer]
}

// typePrefix is the protobuf package prefix of every message a peer may
// send: agentstate's own API messages. System messages (actor.Stop,
// actor.Watch, actor.PoisonPill, remote.ActorPidRequest) are never
// accepted from a peer.
const typePrefix = "agentstate."

func (g *remoteGuard) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainStreamInterceptor(recoverStream(g.m, "remote", g.log), g.streamInterceptor),
		grpc.ChainUnaryInterceptor(g.unaryInterceptor),
	}
}

func (g *remoteGuard) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &guardedStream{ServerStream: ss, g: g, cert: peerCert(ss.Context())})
}

// dialOptions are the remote's client-side options the guard needs: the
// record of the requests this node sends (see sentRequests).
func (g *remoteGuard) dialOptions() []grpc.DialOption {
	if g.sent == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithChainStreamInterceptor(g.sent.clientInterceptor(g.localAddr))}
}

func (g *remoteGuard) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	g.m.remoteRejected.WithLabelValues("unary_method").Inc()
	return nil, status.Errorf(codes.Unimplemented, "%s is not served by this node", info.FullMethod)
}

// guardedStream screens each received message before the remote's reader
// sees it.
type guardedStream struct {
	grpc.ServerStream
	g *remoteGuard
	// peer is the address the peer declared in its ConnectRequest (its
	// actor system's address); "" before it did. Only the stream's
	// goroutine reads and writes it.
	peer string
	// cert is the peer's verified certificate (nil without mutual TLS).
	cert *x509.Certificate
}

func (s *guardedStream) RecvMsg(m any) error {
	if err := s.g.pass(); err != nil {
		return err
	}
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err // the reader reads no state of its own on an error
	}
	if err := s.g.pass(); err != nil {
		return err
	}
	rm, ok := m.(*remote.RemoteMessage)
	if !ok {
		return nil
	}
	if c := rm.GetConnectRequest(); c != nil {
		addr := c.GetServerConnection().GetAddress()
		switch {
		case addr == s.g.localAddr():
			// The node never dials itself; a peer that claims its address
			// would have the node's actors answer into its own futures.
			return s.g.fatal("peer_is_self", "a peer declared this node's own address")
		case s.peer == "":
			s.peer = addr
		case addr != s.peer:
			// The peer address binds what the stream may send; it is
			// declared once.
			return s.g.fatal("peer_changed", "a stream declares its peer address once")
		}
		return nil
	}
	if b := rm.GetMessageBatch(); b != nil {
		if err := s.g.screenAs(s.ServerStream.Context(), b, s.peer, s.cert); err != nil {
			return err
		}
		return s.g.paceBatch(s.ServerStream.Context(), b)
	}
	return nil
}

// pass returns UNAVAILABLE while the endpoint is shutting down (see
// quiesce).
func (g *remoteGuard) pass() error {
	if !g.quiesce.TryRLock() {
		return status.Error(codes.Unavailable, "the node is shutting down")
	}
	g.quiesce.RUnlock()
	return nil
}

// screen validates b, received on a stream whose peer declared the address
// peer, in place: it returns a non-nil error (ending the stream) for a
// malformed batch, and otherwise removes the envelopes that may not be
// delivered.
func (g *remoteGuard) screen(b *remote.MessageBatch, peer string) error {
	return g.screenAs(context.Background(), b, peer, nil)
}

// screenAs is screen for a peer whose verified certificate is cert: each
// request is also decided as the principal it names (remoteAuthz).
func (g *remoteGuard) screenAs(ctx context.Context, b *remote.MessageBatch, peer string, cert *x509.Certificate) error {
	for _, p := range b.Targets {
		if p == nil {
			return g.fatal("nil_pid", "batch has a nil target PID")
		}
	}
	for _, p := range b.Senders {
		if p == nil {
			return g.fatal("nil_pid", "batch has a nil sender PID")
		}
	}
	kept := b.Envelopes[:0]
	for _, env := range b.Envelopes {
		if env == nil {
			return g.fatal("malformed", "batch has a nil envelope")
		}
		switch {
		case env.TypeId < 0 || int(env.TypeId) >= len(b.TypeNames):
			return g.fatal("malformed", "envelope type_id out of range")
		case env.Target < 0 || int(env.Target) >= len(b.Targets):
			return g.fatal("malformed", "envelope target out of range")
		case env.Sender < 0 || int(env.Sender) > len(b.Senders):
			return g.fatal("malformed", "envelope sender out of range")
		case env.SerializerId != 0:
			return g.fatal("serializer", "only the protobuf serializer (0) is accepted")
		}
		typeName := b.TypeNames[env.TypeId]
		target := b.Targets[env.Target]
		if env.Sender > 0 && b.Senders[env.Sender-1].GetAddress() != peer {
			g.drop("sender_not_peer", typeName, target)
			continue
		}
		if reason, answer := g.refuse(ctx, cert, typeName, target, env.MessageData, peer); reason != "" {
			g.drop(reason, typeName, target)
			g.answer(b, env, answer)
			continue
		}
		g.stampPrincipal(env, cert)
		kept = append(kept, env)
	}
	// Clear the tail so dropped envelopes are not reachable from b.
	for i := len(kept); i < len(b.Envelopes); i++ {
		b.Envelopes[i] = nil
	}
	b.Envelopes = kept
	return nil
}

// stampPrincipal names, in env's header, the principal the peer's
// certificate names, over whatever the peer wrote there: the audit entries
// the request causes name it (principal.Header), and a principal cannot
// pass for another. A peer naming none is a node of the deployment,
// trusted as the node: a member forwarding a request names the principal
// that member authenticated.
func (g *remoteGuard) stampPrincipal(env *remote.MessageEnvelope, cert *x509.Certificate) {
	ra := g.authz.p.Load()
	if ra == nil {
		return
	}
	p := ra.principal(cert)
	if p == nil {
		return
	}
	if env.MessageHeader == nil || env.MessageHeader.HeaderData == nil {
		env.MessageHeader = &remote.MessageHeader{HeaderData: map[string]string{}}
	}
	env.MessageHeader.HeaderData[principal.Header] = p.Name
}

// drop counts and logs (rate-limited) an envelope that is not delivered.
func (g *remoteGuard) drop(reason, typeName string, target *actor.PID) {
	g.m.remoteRejected.WithLabelValues(reason).Inc()
	g.drops.Warn("reason", reason, "type", clipName(typeName), "target", clipName(target.GetId()))
}

// refuse says why an envelope of typeName for target, carrying data and
// received from the peer at address peer (whose certificate is cert), may
// not be delivered ("" when it may), with the error for its sender (nil
// for none: a reply is not answered).
func (g *remoteGuard) refuse(ctx context.Context, cert *x509.Certificate, typeName string, target *actor.PID, data []byte, peer string) (reason string, answer error) {
	if g.cluster && target.GetAddress() == g.localAddr() && clusterTraffic(typeName, target.GetId()) {
		if isFuture(target.GetId()) && !g.sent.answeredBy(target.GetId(), peer) {
			return "reply_not_from_requestee", nil
		}
		if isFuture(target.GetId()) || !strings.HasPrefix(typeName, typePrefix) {
			return "", nil // replies and the cluster's own protocol
		}
		// A request to a session's or plan's activation: decided as any
		// request is, when the peer is a principal.
		return g.authorize(ctx, cert, typeName, data)
	}
	if !strings.HasPrefix(typeName, typePrefix) {
		return "type_not_allowed", invalid("message type " + quoteClip(typeName) + " is not accepted from a remote peer")
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(typeName))
	if err != nil {
		return "unknown_type", invalid("message type " + quoteClip(typeName) + " is unknown to this node (an older build?)")
	}
	if target.GetAddress() != g.localAddr() || !g.exposed[target.GetId()] {
		return "target_not_exposed", invalid("actor " + quoteClip(target.GetAddress()+"/"+target.GetId()) + " is not served to remote peers")
	}
	// The reader ends the whole stream, answering nobody, on a message it
	// cannot decode; decoded here first, such a request is refused alone,
	// as INVALID_ARGUMENT like an undecodable gRPC request.
	if err := proto.Unmarshal(data, mt.New().Interface()); err != nil {
		return "undecodable", invalid("the request could not be decoded as " + typeName + ": " + err.Error())
	}
	return g.authorize(ctx, cert, typeName, data)
}

// authorize decides a request of typeName (an agentstate message this
// binary links) as the principal cert names (remoteAuthz); a peer naming
// none costs no decoding.
func (g *remoteGuard) authorize(ctx context.Context, cert *x509.Certificate, typeName string, data []byte) (reason string, answer error) {
	ra := g.authz.p.Load()
	if ra == nil {
		if g.pending != nil && cert != nil && g.pending.byCert(cert) != nil {
			return "auth_pending", errs.Unavailable("the node is starting: its identities are not loaded yet")
		}
		return "", nil
	}
	p := ra.principal(cert)
	if p == nil {
		return "", nil
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(typeName))
	if err != nil {
		return "unknown_type", invalid("message type " + quoteClip(typeName) + " is unknown to this node")
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(data, msg); err != nil {
		return "undecodable", invalid("the request could not be decoded as " + typeName + ": " + err.Error())
	}
	if err := ra.decide(ctx, p, mt.Descriptor().FullName(), msg); err != nil {
		return "unauthorized", err
	}
	return "", nil
}

// invalid is the INVALID_ARGUMENT answer of a refused envelope. A peer's
// names reach here decoded as proto3 strings (UTF-8), and clipName keeps
// them so; the reply must marshal whatever the input, so anything else is
// replaced rather than left to fail the send.
func invalid(msg string) error {
	return errs.InvalidArgument("%s", strings.ToValidUTF8(msg, "\uFFFD"))
}

// answer replies to the sender of a dropped envelope, if it has one, with
// the refusal, so that a peer's request fails fast.
func (g *remoteGuard) answer(b *remote.MessageBatch, env *remote.MessageEnvelope, refusal error) {
	if env.Sender == 0 || g.reply == nil || refusal == nil {
		return
	}
	to := proto.Clone(b.Senders[env.Sender-1]).(*actor.PID)
	if env.SenderRequestId > 0 {
		to.RequestId = env.SenderRequestId
	}
	if to.GetAddress() == "" || to.GetAddress() == g.localAddr() {
		return // never answer ourselves: that would loop through the guard
	}
	g.reply(to, errs.ToProto(refusal))
}

func (g *remoteGuard) fatal(reason, msg string) error {
	g.m.remoteRejected.WithLabelValues(reason).Inc()
	g.closes.Warn("reason", reason, "detail", msg)
	return status.Error(codes.InvalidArgument, msg)
}

// clipName bounds a peer-supplied name for a log line or a reply. It cuts
// at a rune boundary: a reply is a proto3 string, which must be UTF-8, and
// a reply that does not marshal is never sent (its sender would wait out
// its timeout).
func clipName(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func quoteClip(s string) string { return "\"" + clipName(s) + "\"" }
