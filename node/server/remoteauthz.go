package server

import (
	"context"
	"crypto/x509"
	"sync/atomic"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// remoteAuthz decides the requests remote peers send, by the gRPC API's
// rules, as the principal the peer's certificate names.
//
// Invariants: a peer whose verified certificate names a principal of the
// --auth-file (uri_sans, then dns_sans, as on the gRPC side) is that
// principal for each request it sends: a request type is decided by the
// rule of the method whose request it is; a type no rule covers, or whose
// rule trims answers (a session list, an audit entry: the reply goes from
// the actor to the peer, past any filter), is refused unless the principal
// reads every namespace. A peer whose certificate names no principal is a
// node of the deployment, trusted as the node itself (the remote CA issues
// certificates to nodes, and to the principals the file names); so is any
// peer of a node without authentication. Identities reloaded on SIGHUP
// apply to the next request.
type remoteAuthz struct {
	auth  *authenticator
	authz *authorizer
	// byType are the method and rule of each request type.
	byType map[protoreflect.FullName]remoteRule
}

type remoteRule struct {
	method string
	rule   rule
}

// remoteServices are the services whose requests a peer may send to the
// exposed actors.
var remoteServices = []string{
	sessionv1.SessionService_ServiceDesc.ServiceName, planv1.PlanService_ServiceDesc.ServiceName,
	auditv1.AuditService_ServiceDesc.ServiceName, feedv1.FeedService_ServiceDesc.ServiceName,
}

// feedControl are the feed actor's own messages about a subscription the
// peer opened (it names it by its id): no namespace of their own.
var feedControl = map[protoreflect.FullName]bool{
	(&feedv1.Ack{}).ProtoReflect().Descriptor().FullName():         true,
	(&feedv1.Unsubscribe{}).ProtoReflect().Descriptor().FullName(): true,
}

func newRemoteAuthz(auth *authenticator, authz *authorizer) *remoteAuthz {
	ra := &remoteAuthz{auth: auth, authz: authz, byType: map[protoreflect.FullName]remoteRule{}}
	for _, svc := range remoteServices {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		if err != nil {
			continue // a service this binary does not link serves nothing
		}
		ms := d.(protoreflect.ServiceDescriptor).Methods()
		for i := 0; i < ms.Len(); i++ {
			m := ms.Get(i)
			name := "/" + svc + "/" + string(m.Name())
			r, ok := authz.rules[name]
			in := m.Input().FullName()
			if _, seen := ra.byType[in]; !ok || (seen && (m.IsStreamingClient() || m.IsStreamingServer())) {
				continue // a unary method's rule decides a type it shares with a stream
			}
			ra.byType[in] = remoteRule{method: name, rule: r}
		}
	}
	return ra
}

// principal is the principal cert names; nil for none (a node of the
// deployment, or a peer without a certificate).
func (ra *remoteAuthz) principal(cert *x509.Certificate) *Principal {
	if cert == nil {
		return nil
	}
	return ra.auth.ids.Load().byCert(cert)
}

// decide is nil when p may have msg, of type name, delivered; else the
// error its sender is answered with.
func (ra *remoteAuthz) decide(ctx context.Context, p *Principal, name protoreflect.FullName, msg proto.Message) error {
	if feedControl[name] {
		return nil
	}
	rr, ok := ra.byType[name]
	switch {
	case !ok:
		return errs.PermissionDenied("principal %q may not send %s over the remote endpoint: it is no request of the API", p.Name, name)
	case rr.rule.filter != nil && p.everywhere < roleReader:
		return errs.PermissionDenied("principal %q may send %s over the remote endpoint only with a reader grant on \"*\" (its answer cannot be filtered there): use the gRPC API", p.Name, name)
	case rr.rule.check == nil && rr.rule.perAppend && p.everywhere < roleWriter:
		return errs.PermissionDenied("principal %q may send %s over the remote endpoint only with a writer grant on \"*\": use the gRPC API", p.Name, name)
	case rr.rule.check == nil:
		return nil
	}
	return rr.rule.check(&decider{ctx: ctx, p: p, z: ra.authz, method: rr.method}, msg)
}

// peerCert is the verified client certificate of a remote stream's peer;
// nil without mutual TLS.
func peerCert(ctx context.Context) *x509.Certificate {
	pr, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := pr.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return ti.State.VerifiedChains[0][0]
}

// remoteAuthzSlot holds the endpoint's remoteAuthz once the gRPC API,
// which owns the identities, is built (the remote starts first).
type remoteAuthzSlot struct{ p atomic.Pointer[remoteAuthz] }
