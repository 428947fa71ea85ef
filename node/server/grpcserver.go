package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"github.com/agentstate/agentstate/actors/fairshare"
	"github.com/agentstate/agentstate/actors/feed"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/appendstream"
	"github.com/agentstate/agentstate/node/codec"
	"github.com/agentstate/agentstate/node/feedstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// apiServices are the services the gRPC API serves.
type apiServices struct {
	Sessions sessionv1.SessionServiceServer
	Plans    planv1.PlanServiceServer
	Audit    auditv1.AuditServiceServer
	// Feeds is optional (nil: not served).
	Feeds *feed.Hub
}

// apiOptions configure the gRPC API server.
type apiOptions struct {
	TLSCert, TLSKey string
	// TLSClientCA, when set, asks clients for a certificate, verified
	// against it: a principal may authenticate by one (uri_sans, dns_sans).
	TLSClientCA string
	// Identities, when set, are the principals every RPC must
	// authenticate as; Token, when not empty and Identities nil, is
	// tokenIdentities(Token). Neither: no authentication.
	Identities *identities
	Token      string
	// SessionNamespace reads a stored session's namespace (the
	// authorizer's lookup; NOT_FOUND when none).
	SessionNamespace func(ctx context.Context, id string) (string, error)
	MaxRecvBytes     int
	// MarkNetwork marks a request's context as a network sender's.
	MarkNetwork func(context.Context) context.Context
	// Conns bounds connections' streams and idleness; Streams what one
	// AppendBatches stream may hold.
	Conns   connLimits
	Streams appendstream.Limits
	// ShareRate is the work per second apportioned among the principals
	// using the node at once (fairshare.Pacer; 0: fairshare.DefaultRate).
	ShareRate int64
	// RequestBytes bounds the unary requests in flight (requestBudget;
	// 0: DefaultGRPCRequestBytes).
	RequestBytes int64
	// StreamsTotal bounds the streams open on all connections (streamTap;
	// 0: DefaultGRPCMaxStreamsTotal).
	StreamsTotal int
	// Feeds bounds what the feed streams hold (0 fields: defaults).
	Feeds feedstream.Limits
	// OwnerHint names, on the answer to a unary request forwarded to its
	// owner on another member, that member (ownerHint; cluster mode).
	OwnerHint bool
}

// apiServer is the gRPC API: the three services, the standard health
// service and server reflection (so grpcurl needs no .proto files).
type apiServer struct {
	srv     *grpc.Server
	health  *health.Server
	auditor *failureAuditor // nil without authentication
	// auth and authz are nil without authentication; clientCA says
	// whether the TLS handshake verifies client certificates.
	auth     *authenticator
	authz    *authorizer
	clientCA bool
	// draining is closed by shutdown, before GracefulStop: open append
	// streams end (appendstream.Server.Draining) instead of holding it.
	draining chan struct{}
	// gate counts the calls in flight other than the feeds'.
	gate *rpcGate
	// conns are the open connections (serve wraps the listener).
	conns *connTracker
	// tap admits streams: the token and the node-wide stream bound.
	tap *streamTap
	// pace holds each principal to its share of the work rate.
	pace *fairshare.Pacer
}

// serve serves the API on lis until it is stopped.
func (a *apiServer) serve(lis net.Listener) error {
	a.conns.Listener = lis
	return a.srv.Serve(a.conns)
}

func newAPIServer(svc apiServices, opt apiOptions, m *metrics, log *slog.Logger) (*apiServer, error) {
	a := &apiServer{draining: make(chan struct{}), gate: &rpcGate{}, conns: &connTracker{conns: make(map[string]net.Conn)},
		clientCA: opt.TLSClientCA != ""}
	ids := opt.Identities
	if ids == nil && opt.Token != "" {
		ids = tokenIdentities(opt.Token)
	}
	if ids != nil {
		if err := a.fits(ids); err != nil {
			return nil, err
		}
		a.auditor = newFailureAuditor(svc.Audit, opt.MarkNetwork, m, log)
		a.auth = newAuthenticatorWith(ids, a.auditor, m, log)
		a.authz = &authorizer{rules: apiRules(), sessionNamespace: opt.SessionNamespace,
			namespaces: newNamespaceCache(DefaultNamespaceCacheEntries)}
	}
	a.tap = newStreamTap(a.auth, opt.StreamsTotal, m, log)
	a.tap.conns = a.conns
	a.pace = fairshare.NewPacer(opt.ShareRate, 0)
	pace := pacing{p: a.pace}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentstate_grpc_streams_open", Help: "gRPC streams admitted and not yet ended (bounded by --grpc-max-streams-total).",
	}, func() float64 { return float64(a.tap.inUse()) }))
	sopts := []grpc.ServerOption{
		grpc.InTapHandle(a.tap.handle),
		// The gate first: it counts every call, whatever the chain
		// below answers.
		grpc.ChainUnaryInterceptor(a.gate.unary),
		grpc.ChainStreamInterceptor(a.gate.stream),
		grpc.MaxRecvMsgSize(opt.MaxRecvBytes),
		grpc.ForceServerCodecV2(codec.Codec()),
		grpc.ChainUnaryInterceptor(unaryChain(m, opt.MarkNetwork, log)...),
		grpc.ChainStreamInterceptor(streamChain(m, log)...),
		grpc.ChainUnaryInterceptor(pace.unary),
		grpc.ChainStreamInterceptor(pace.stream),
		grpc.StatsHandler(pace),
	}
	if opt.OwnerHint {
		sopts = append(sopts, grpc.ChainUnaryInterceptor(ownerHint))
	}
	if a.authz != nil {
		// Innermost: a refusal is counted and logged as any answer.
		sopts = append(sopts, grpc.ChainUnaryInterceptor(a.authz.unary), grpc.ChainStreamInterceptor(a.authz.stream))
	}
	sopts = append(sopts, opt.Conns.serverOptions()...)
	if opt.TLSCert != "" || opt.TLSKey != "" {
		if opt.TLSCert == "" || opt.TLSKey == "" {
			return nil, fmt.Errorf("--tls-cert and --tls-key go together")
		}
		cert, err := tls.LoadX509KeyPair(opt.TLSCert, opt.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("load TLS key pair: %w", err)
		}
		warnCNOnly(log, "--tls-cert", cert)
		cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if err := withClientCA(cfg, opt.TLSClientCA); err != nil {
			return nil, err
		}
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(cfg)))
	} else if opt.TLSClientCA != "" {
		return nil, fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key: client certificates are asked for in the TLS handshake")
	}
	a.srv = grpc.NewServer(sopts...)
	reg := decodeErrors{Server: a.srv, requests: newRequestBudget(opt.RequestBytes)}
	a.tap.requests = reg.requests
	reg.requests.pace = pace.p
	reg.requests.refused = a.conns.pause
	a.tap.pace = a.pace
	sessions := svc.Sessions
	reg.received = func(ctx context.Context, _ string, msg any) error { return pace.received(ctx, msg) }
	if a.authz != nil {
		reg.received = func(ctx context.Context, method string, msg any) error {
			if err := pace.received(ctx, msg); err != nil {
				return err
			}
			return a.authz.received(ctx, method, msg)
		}
		sessions = a.authz.authorizeAppends(sessions)
	}
	// AppendStream is served on top of the same façade as Append; the
	// stream interceptors see the stream, so its appends are marked and
	// counted here, one by one (and authorized, by authorizeAppends).
	sessionv1.RegisterSessionServiceServer(reg, &appendstream.Server{
		SessionServiceServer: sessions, Mark: opt.MarkNetwork, Observe: m.countAppend, Draining: a.draining,
		Limits: opt.Streams, OnStall: a.conns.closePeer,
	})
	planv1.RegisterPlanServiceServer(reg, svc.Plans)
	auditv1.RegisterAuditServiceServer(reg, svc.Audit)
	services := []string{"", sessionv1.SessionService_ServiceDesc.ServiceName,
		planv1.PlanService_ServiceDesc.ServiceName, auditv1.AuditService_ServiceDesc.ServiceName}
	if svc.Feeds != nil {
		// A stalled tail's connection is closed (its transport keeps the
		// unread events), and a closed connection's room given back.
		feeds := &feedstream.Server{Hub: svc.Feeds, Limits: opt.Feeds, OnStall: a.conns.closePeer}
		a.conns.onClose = feeds.ConnClosed
		m.feedBytesGauge(feeds.HeldBytes)
		feedv1.RegisterFeedServiceServer(reg, feeds)
		services = append(services, feedv1.FeedService_ServiceDesc.ServiceName)
	}

	a.health = health.NewServer()
	healthpb.RegisterHealthServer(reg, drainingHealth{Server: a.health, draining: a.draining})
	for _, name := range services {
		a.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	reflection.Register(reg)
	a.tap.learn(a.srv)
	return a, nil
}

// countAppend counts an acknowledged append (unary or on a stream) in the
// append metrics; failures are counted by code elsewhere.
func (m *metrics) countAppend(resp *sessionv1.AppendResponse, err error) {
	switch {
	case err != nil || resp == nil:
	case resp.GetDuplicate():
		m.appends.WithLabelValues("duplicate").Inc()
	default:
		m.appends.WithLabelValues("stored").Inc()
		m.appended.Add(float64(len(resp.GetMessages())))
	}
}

// drainingHealth is the standard health service whose Watch streams end
// (UNAVAILABLE) when the node drains, after health.Shutdown published
// NOT_SERVING: like an open append stream, a watching client would
// otherwise hold the graceful stop for its whole timeout.
type drainingHealth struct {
	*health.Server
	draining <-chan struct{}
}

func (h drainingHealth) Watch(in *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-h.draining:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := h.Server.Watch(in, &watchStream{Health_WatchServer: stream, ctx: ctx})
	select {
	case <-h.draining:
		return status.Error(codes.Unavailable, "the node is shutting down")
	default:
		return err
	}
}

// watchStream is a Watch stream whose context also ends when the node
// drains.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (w *watchStream) Context() context.Context { return w.ctx }
