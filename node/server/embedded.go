package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentstate/agentstate/actors"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/grpc"
)

// NewPrincipal is a principal for the embedded API (Guard): its name, the
// operator role or not, and its grants as "<namespace>:<role>" strings
// ("team-*:reader", "billing:admin"), checked as an --auth-file's are.
func NewPrincipal(name string, operator bool, grants ...string) (*Principal, error) {
	if name == "" {
		return nil, fmt.Errorf("a principal needs a name")
	}
	if principal.Reserved(name) {
		// A JWT's claim names principals through here too.
		return nil, fmt.Errorf("principal %q: the name is reserved for the audit trail's own principals", name)
	}
	spec := principalSpec{Name: name, Operator: operator}
	for _, g := range grants {
		i := strings.LastIndexByte(g, ':')
		if i < 0 {
			return nil, fmt.Errorf("principal %q: grant %q is not \"<namespace>:<role>\"", name, clipName(g))
		}
		spec.Grants = append(spec.Grants, grantSpec{Namespace: g[:i], Role: g[i+1:]})
	}
	p, err := spec.principal()
	if err != nil {
		return nil, fmt.Errorf("principal %q: %w", name, err)
	}
	return p, nil
}

// WithPrincipal is ctx carrying p: a call of the embedded API (Guard) with
// it is decided as p's, by the rules of the gRPC API.
func WithPrincipal(ctx context.Context, p *Principal) context.Context { return withPrincipal(ctx, p) }

// PrincipalFrom is the principal ctx carries (WithPrincipal, or the one a
// gRPC request authenticated as); nil when none.
func PrincipalFrom(ctx context.Context) *Principal { return principalFrom(ctx) }

// Embedded are an embedded node's services (actors.Start) behind the gRPC
// API's authorization: a call whose context carries a principal
// (WithPrincipal) is decided by the rule of its gRPC method, exactly as
// over gRPC (NOT_FOUND for what the principal cannot read,
// PERMISSION_DENIED for what it may not do, nothing stored when refused);
// a call without one is the program's own and is trusted, as the actors
// themselves are. On append streams a refused append ends the stream
// (over gRPC it is that append's outcome).
type Embedded struct {
	Sessions sessionv1.SessionServiceServer
	Plans    planv1.PlanServiceServer
	Audit    auditv1.AuditServiceServer
}

// Guard puts n's services behind the authorization; reader is its store's
// (the namespace of a session a request names is read from it).
func Guard(n *actors.Node, reader persistence.Reader) *Embedded {
	z := &authorizer{rules: apiRules(), namespaces: newNamespaceCache(DefaultNamespaceCacheEntries),
		sessionNamespace: func(ctx context.Context, id string) (string, error) {
			s, err := reader.GetSession(ctx, id)
			return s.GetNamespace(), err
		}}
	return &Embedded{
		Sessions: guardedSessions{inner: n.Sessions(), z: z},
		Plans:    guardedPlans{inner: n.Plans(), z: z},
		Audit:    guardedAudit{inner: n.Audit(), z: z},
	}
}

// guarded calls call, first deciding req by method's rule (and trimming
// the answer by its filter) when ctx carries a principal.
func guarded[Req, Resp any](z *authorizer, ctx context.Context, method string, req *Req, call func(context.Context, *Req) (*Resp, error)) (*Resp, error) {
	if principalFrom(ctx) == nil {
		return call(ctx, req)
	}
	if r := z.rules[method]; r.perAppend && r.check != nil {
		if err := z.decideAppend(ctx, any(req).(*sessionv1.AppendRequest)); err != nil {
			return nil, err
		}
		return call(ctx, req)
	}
	resp, err := z.unary(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, func(ctx context.Context, r any) (any, error) {
		return call(ctx, r.(*Req))
	})
	out, _ := resp.(*Resp)
	return out, err
}

type guardedSessions struct {
	sessionv1.UnimplementedSessionServiceServer
	inner sessionv1.SessionServiceServer
	z     *authorizer
}

type guardedPlans struct {
	planv1.UnimplementedPlanServiceServer
	inner planv1.PlanServiceServer
	z     *authorizer
}

type guardedAudit struct {
	auditv1.UnimplementedAuditServiceServer
	inner auditv1.AuditServiceServer
	z     *authorizer
}

func (s guardedSessions) Append(ctx context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	return guarded(s.z, ctx, appendMethod, req, s.inner.Append)
}

func (s guardedSessions) AppendStream(st grpc.BidiStreamingServer[sessionv1.AppendRequest, sessionv1.AppendStreamResponse]) error {
	ctx := st.Context()
	if principalFrom(ctx) == nil {
		return s.inner.AppendStream(st)
	}
	return s.inner.AppendStream(decidedBidi[sessionv1.AppendRequest, sessionv1.AppendStreamResponse]{st,
		func(m *sessionv1.AppendRequest) error { return s.z.decideAppend(ctx, m) }})
}

func (s guardedSessions) AppendBatches(st grpc.BidiStreamingServer[sessionv1.AppendBatch, sessionv1.AppendOutcomes]) error {
	ctx := st.Context()
	if principalFrom(ctx) == nil {
		return s.inner.AppendBatches(st)
	}
	return s.inner.AppendBatches(decidedBidi[sessionv1.AppendBatch, sessionv1.AppendOutcomes]{st, func(b *sessionv1.AppendBatch) error {
		for _, a := range b.GetAppends() {
			if err := s.z.decideAppend(ctx, a.GetRequest()); err != nil {
				return err
			}
		}
		return nil
	}})
}

func (s guardedSessions) ExportStream(req *sessionv1.ExportSessionRequest, st grpc.ServerStreamingServer[sessionv1.ExportChunk]) error {
	if principalFrom(st.Context()) != nil {
		if err := s.z.received(st.Context(), sessionv1.SessionService_ExportStream_FullMethodName, req); err != nil {
			return err
		}
	}
	return s.inner.ExportStream(req, st)
}

func (s guardedSessions) ImportStream(st grpc.ClientStreamingServer[sessionv1.ImportChunk, sessionv1.ImportSessionResponse]) error {
	ctx := st.Context()
	if principalFrom(ctx) == nil {
		return s.inner.ImportStream(st)
	}
	return s.inner.ImportStream(decidedClientStream[sessionv1.ImportChunk, sessionv1.ImportSessionResponse]{st,
		func(m *sessionv1.ImportChunk) error {
			return s.z.received(ctx, sessionv1.SessionService_ImportStream_FullMethodName, m)
		}})
}

// decidedBidi decides each message received on a stream before the
// service sees it; a refusal ends the stream.
type decidedBidi[Req, Resp any] struct {
	grpc.BidiStreamingServer[Req, Resp]
	decide func(*Req) error
}

func (s decidedBidi[Req, Resp]) Recv() (*Req, error) {
	m, err := s.BidiStreamingServer.Recv()
	if err == nil {
		err = s.decide(m)
	}
	return m, err
}

func (s decidedBidi[Req, Resp]) RecvMsg(m any) error {
	if err := s.BidiStreamingServer.RecvMsg(m); err != nil {
		return err
	}
	return s.decide(m.(*Req))
}

type decidedClientStream[Req, Resp any] struct {
	grpc.ClientStreamingServer[Req, Resp]
	decide func(*Req) error
}

func (s decidedClientStream[Req, Resp]) Recv() (*Req, error) {
	m, err := s.ClientStreamingServer.Recv()
	if err == nil {
		err = s.decide(m)
	}
	return m, err
}

func (s decidedClientStream[Req, Resp]) RecvMsg(m any) error {
	if err := s.ClientStreamingServer.RecvMsg(m); err != nil {
		return err
	}
	return s.decide(m.(*Req))
}
