package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/agentstate/agentstate/cmd/node/appendstream"
	auditv1 "github.com/agentstate/agentstate/messages/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/session/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// apiServices are the three services the gRPC API serves.
type apiServices struct {
	Sessions sessionv1.SessionServiceServer
	Plans    planv1.PlanServiceServer
	Audit    auditv1.AuditServiceServer
}

// apiOptions configure the gRPC API server.
type apiOptions struct {
	TLSCert, TLSKey string
	// Token, when not empty, is required on every RPC.
	Token        string
	MaxRecvBytes int
	// MarkNetwork marks a request's context as a network sender's.
	MarkNetwork func(context.Context) context.Context
}

// apiServer is the gRPC API: the three services, the standard health
// service and server reflection (so grpcurl needs no .proto files).
type apiServer struct {
	srv     *grpc.Server
	health  *health.Server
	auditor *failureAuditor // nil without a token
}

func newAPIServer(svc apiServices, opt apiOptions, m *metrics, log *slog.Logger) (*apiServer, error) {
	var auth *authenticator
	a := &apiServer{}
	if opt.Token != "" {
		a.auditor = newFailureAuditor(svc.Audit, opt.MarkNetwork, m, log)
		auth = newAuthenticator(opt.Token, a.auditor, m, log)
	}
	sopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(opt.MaxRecvBytes),
		grpc.ForceServerCodecV2(appendstream.Codec()),
		grpc.ChainUnaryInterceptor(unaryChain(m, auth, opt.MarkNetwork, log)...),
		grpc.ChainStreamInterceptor(streamChain(m, auth, log)...),
	}
	if opt.TLSCert != "" || opt.TLSKey != "" {
		if opt.TLSCert == "" || opt.TLSKey == "" {
			return nil, fmt.Errorf("--tls-cert and --tls-key go together")
		}
		cert, err := tls.LoadX509KeyPair(opt.TLSCert, opt.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("load TLS key pair: %w", err)
		}
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		})))
	}
	a.srv = grpc.NewServer(sopts...)
	reg := decodeErrors{a.srv}
	// AppendStream is served on top of the same façade as Append; the
	// stream interceptors see the stream, so its appends are marked and
	// counted here, one by one.
	sessionv1.RegisterSessionServiceServer(reg, &appendstream.Server{
		SessionServiceServer: svc.Sessions, Mark: opt.MarkNetwork, Observe: m.countAppend,
	})
	planv1.RegisterPlanServiceServer(reg, svc.Plans)
	auditv1.RegisterAuditServiceServer(reg, svc.Audit)

	a.health = health.NewServer()
	healthpb.RegisterHealthServer(reg, a.health)
	for _, name := range []string{"", sessionv1.SessionService_ServiceDesc.ServiceName,
		planv1.PlanService_ServiceDesc.ServiceName, auditv1.AuditService_ServiceDesc.ServiceName} {
		a.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	reflection.Register(reg)
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
