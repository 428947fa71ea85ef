package server

import (
	"context"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/principal"
	"google.golang.org/grpc"
)

type principalKey struct{}

// withPrincipal is ctx carrying the principal its request authenticated as,
// and its name for the audit entries the request causes (package
// principal: the owners record it whichever member they run on).
func withPrincipal(ctx context.Context, p *Principal) context.Context {
	return principal.With(context.WithValue(ctx, principalKey{}, p), p.Name)
}

// principalFrom is the principal of ctx's request (streamTap put it
// there); nil when none was.
func principalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// authorizer decides every request of a principal by its method's rule
// (rules.go), before the handler runs: a refused request stores nothing.
//
// Invariants: a method without a rule is refused (fail closed; the matrix
// test fails first); a request naming a session, plan or audit entry in a
// namespace the principal cannot read answers NOT_FOUND with the message a
// missing one gets, so a stranger learns nothing, not even existence; one
// it can read but not change answers PERMISSION_DENIED. The store is read
// (one indexed read of the session) only when the principal's grants do
// not cover every namespace with the role needed, so the single-token
// node decides from its rule alone.
type authorizer struct {
	rules map[string]rule
	// sessionNamespace is a stored session's namespace; NOT_FOUND when
	// there is none.
	sessionNamespace func(ctx context.Context, id string) (string, error)
	// namespaces, when set, remembers sessionNamespace's answers.
	namespaces *namespaceCache
}

// namespaceOf is session id's namespace, and whether it was remembered.
func (z *authorizer) namespaceOf(ctx context.Context, id string) (string, bool, error) {
	if z.namespaces == nil {
		ns, err := z.sessionNamespace(ctx, id)
		return ns, false, err
	}
	return z.namespaces.get(ctx, id, z.sessionNamespace)
}

// rule is how one method is decided.
type rule struct {
	// check decides one request message: the unary request, a server
	// stream's request, each message a client sends on a stream. nil:
	// any authenticated principal.
	check func(d *decider, msg any) error
	// filter, when set, trims a unary response to what the principal
	// may read (lists), or hides an entry it may not read (NOT_FOUND).
	filter func(d *decider, resp any) (any, error)
	// perAppend: each append is decided on its own by authorizedSessions
	// (an append stream's refused append is that append's outcome, as a
	// missing session's is; the stream goes on).
	perAppend bool
	// keep, when set, decides each message a server stream sends: false
	// drops it (a feed's entry the principal may not read).
	keep func(d *decider, msg any) bool
}

// decider is one request's authorization: who, which method, and the
// lookups of the namespaces the request names.
type decider struct {
	ctx    context.Context
	p      *Principal
	z      *authorizer
	method string
}

// lookup is the principal of ctx and the rule of method. The authorizer
// exists only on a node with authentication, so a request without a
// principal got past the stream tap somehow: refused, as is a method
// without a rule (fail closed).
func (z *authorizer) lookup(ctx context.Context, method string) (*Principal, rule, error) {
	p := principalFrom(ctx)
	if p == nil {
		return nil, rule{}, errs.Unauthenticated("%s: the request carries no authenticated principal", method)
	}
	r, ok := z.rules[method]
	if !ok {
		return nil, rule{}, errs.PermissionDenied("%s has no authorization rule: refused for every principal", method)
	}
	return p, r, nil
}

func (z *authorizer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	p, r, err := z.lookup(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if (r.check == nil || r.perAppend) && r.filter == nil {
		return handler(ctx, req)
	}
	d := &decider{ctx: ctx, p: p, z: z, method: info.FullMethod}
	if r.check != nil && !r.perAppend {
		if err := r.check(d, req); err != nil {
			return nil, err
		}
	}
	resp, err := handler(ctx, req)
	if err != nil || r.filter == nil {
		return resp, err
	}
	return r.filter(d, resp)
}

// stream refuses a stream whose method has no rule; its messages are
// decided as they are received (received).
func (z *authorizer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	p, r, err := z.lookup(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	if r.keep != nil && !p.operator && p.everywhere < roleReader {
		ss = keptStream{ServerStream: ss, keep: r.keep, d: &decider{ctx: ss.Context(), p: p, z: z, method: info.FullMethod}}
	}
	return handler(srv, ss)
}

// keptStream sends only the messages its rule keeps.
type keptStream struct {
	grpc.ServerStream
	keep func(d *decider, msg any) bool
	d    *decider
}

func (s keptStream) SendMsg(m any) error {
	if !s.keep(s.d, m) {
		return nil
	}
	return s.ServerStream.SendMsg(m)
}

// received decides one message received on a stream of method, once
// decoded (decodeErrors calls it): its refusal ends the stream.
func (z *authorizer) received(ctx context.Context, method string, msg any) error {
	p, r, err := z.lookup(ctx, method)
	if err != nil || r.check == nil || r.perAppend {
		return err
	}
	return r.check(&decider{ctx: ctx, p: p, z: z, method: method}, msg)
}

// decideAppend decides one append, of a unary Append or of a stream, by
// the Append rule.
func (z *authorizer) decideAppend(ctx context.Context, req *sessionv1.AppendRequest) error {
	p, r, err := z.lookup(ctx, appendMethod)
	if err != nil {
		return err
	}
	return r.check(&decider{ctx: ctx, p: p, z: z, method: appendMethod}, req)
}

// session decides need on the session id names (id "" is left to the
// handler, which refuses it INVALID_ARGUMENT).
func (d *decider) session(id string, need role) error {
	if id == "" || d.p.everywhere >= need {
		return nil
	}
	if err := ids.Check("session_id", id); err != nil {
		return err // as the handler would answer: a malformed id names nothing
	}
	ns, cached, err := d.z.namespaceOf(d.ctx, id)
	if err != nil {
		return err
	}
	err = d.entity(ns, need, func() error { return errs.NotFound("session %s not found", id) })
	if err != nil && cached {
		// A remembered session may have been deleted since, and a deleted
		// one is refused NOT_FOUND whatever the role: decide again from
		// the store.
		d.z.namespaces.forget(id)
		return d.session(id, need)
	}
	return err
}

// entity decides need on an entity of namespace ns: one the principal
// cannot read is notFound, exactly as a missing one.
func (d *decider) entity(ns string, need role, notFound func() error) error {
	r := d.p.role(ns)
	if r >= need {
		return nil
	}
	if r == roleNone {
		return notFound()
	}
	return d.denied(ns, r, need)
}

// namespace decides need on namespace ns itself (a create, an import, a
// scope): there is nothing to hide, so any refusal is PERMISSION_DENIED.
func (d *decider) namespace(ns string, need role) error {
	if r := d.p.role(ns); r < need {
		return d.denied(ns, r, need)
	}
	return nil
}

func (d *decider) denied(ns string, has, need role) error {
	return errs.PermissionDenied("principal %q holds %s on namespace %q; %s needs %s", d.p.Name, has, ns, d.method, need)
}

// operator decides a node-wide request.
func (d *decider) operator() error {
	if d.p.operator {
		return nil
	}
	return errs.PermissionDenied("principal %q is not the node's operator; %s needs the operator role", d.p.Name, d.method)
}

// authorizedSessions decides every append (unary, and each one of an
// append stream) by the Append rule; the rest of the service is inner's.
type authorizedSessions struct {
	sessionv1.SessionServiceServer
	z *authorizer
}

// asyncAppender is the appendstream fast path (AppendBatches hands each
// append over without a goroutine waiting on it).
type asyncAppender interface {
	AppendAsync(ctx context.Context, req *sessionv1.AppendRequest, done func(*sessionv1.AppendResponse, error))
}

// authorizeAppends wraps svc; it keeps svc's AppendAsync when it has one.
func (z *authorizer) authorizeAppends(svc sessionv1.SessionServiceServer) sessionv1.SessionServiceServer {
	s := authorizedSessions{SessionServiceServer: svc, z: z}
	if a, ok := svc.(asyncAppender); ok {
		return authorizedAsync{authorizedSessions: s, async: a}
	}
	return s
}

func (s authorizedSessions) Append(ctx context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	if err := s.z.decideAppend(ctx, req); err != nil {
		return nil, err
	}
	return s.SessionServiceServer.Append(ctx, req)
}

type authorizedAsync struct {
	authorizedSessions
	async asyncAppender
}

func (s authorizedAsync) AppendAsync(ctx context.Context, req *sessionv1.AppendRequest, done func(*sessionv1.AppendResponse, error)) {
	if err := s.z.decideAppend(ctx, req); err != nil {
		done(nil, err)
		return
	}
	s.async.AppendAsync(ctx, req, done)
}
