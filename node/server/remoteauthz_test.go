package server

import (
	"context"
	"crypto/x509"
	"io"
	"log/slog"
	"net/url"
	"testing"

	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"
)

// remoteRequest is one envelope of a peer's batch and the answer the
// guard must give it: 0 delivered, else the refusal's code.
type remoteRequest struct {
	target string
	msg    proto.Message
	want   errs.Code // 0: delivered
}

// screenRequests screens one batch of reqs from a peer whose certificate
// is cert and checks what was delivered and what each refused sender was
// answered.
func screenRequests(t *testing.T, g *remoteGuard, replies *[]sent, cert *x509.Certificate, reqs []remoteRequest) {
	t.Helper()
	*replies = (*replies)[:0]
	b := &remote.MessageBatch{}
	for i, r := range reqs {
		b.TypeNames = append(b.TypeNames, string(r.msg.ProtoReflect().Descriptor().FullName()))
		b.Targets = append(b.Targets, &actor.PID{Address: nodeAddr, Id: r.target})
		b.Senders = append(b.Senders, &actor.PID{Address: peerAddr, Id: "future$" + string(rune('a'+i))})
		b.Envelopes = append(b.Envelopes, &remote.MessageEnvelope{TypeId: int32(i), Target: int32(i), Sender: int32(i + 1),
			MessageData: mustMarshal(t, r.msg)})
	}
	if err := g.screenAs(context.Background(), b, peerAddr, cert); err != nil {
		t.Fatalf("screen: %v", err)
	}
	delivered := map[int32]bool{}
	for _, env := range b.Envelopes {
		delivered[env.TypeId] = true
	}
	answered := map[string]errs.Code{}
	for _, r := range *replies {
		answered[r.to.GetId()] = r.msg.(*commonv1.Error).GetCode()
	}
	for i, r := range reqs {
		got := answered["future$"+string(rune('a'+i))]
		switch {
		case r.want == 0 && !delivered[int32(i)]:
			t.Errorf("request %d (%T) was refused %s, want it delivered", i, r.msg, got)
		case r.want != 0 && (delivered[int32(i)] || got != r.want):
			t.Errorf("request %d (%T): delivered %v, answered %q; want refused %s", i, r.msg, delivered[int32(i)], got, r.want)
		}
	}
}

// A peer whose certificate names a principal is that principal for each
// request it sends over the remote endpoint, decided by the gRPC API's
// rules: a session of a namespace it cannot read is NOT_FOUND, an act its
// role lacks PERMISSION_DENIED, a list it could only see trimmed
// PERMISSION_DENIED. A certificate naming no principal is a node of the
// deployment (trusted); so is a peer without one (plaintext loopback).
func TestRemotePeersAreAuthorizedAsTheirCertificatesPrincipal(t *testing.T) {
	idents, err := parseIdentities([]byte(`{"principals":[
		{"name":"writer-a","dns_sans":["writer-a.example"],"grants":[{"namespace":"a","role":"writer"}]},
		{"name":"reader-a","uri_sans":["spiffe://example.org/reader-a"],"grants":[{"namespace":"a","role":"reader"}]},
		{"name":"everything","dns_sans":["all.example"],"operator":true,"grants":[{"namespace":"*","role":"admin"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	inA, inB := ids.New(), ids.New()
	namespaces := map[string]string{inA: "a", inB: "b"}
	z := &authorizer{rules: apiRules(), sessionNamespace: func(_ context.Context, id string) (string, error) {
		if ns, ok := namespaces[id]; ok {
			return ns, nil
		}
		return "", errs.NotFound("session %s not found", id)
	}}
	auth := newAuthenticatorWith(idents, nil, newMetrics(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	g, replies := newTestGuard()
	g.authz.p.Store(newRemoteAuthz(auth, z))

	get := func(id string) proto.Message { return &sessionv1.GetSessionRequest{SessionId: id} }
	app := func(id string) proto.Message {
		return &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "x"}}}
	}
	del := func(id string) proto.Message { return &sessionv1.DeleteSessionRequest{SessionId: id} }
	writerA := &x509.Certificate{DNSNames: []string{"Writer-A.example"}}
	screenRequests(t, g, replies, writerA, []remoteRequest{
		{"sessions", get(inA), 0},
		{"sessions", app(inA), 0},
		{"sessions", get(inB), errs.NotFoundCode},
		{"sessions", app(inB), errs.NotFoundCode},
		{"sessions", del(inA), errs.PermissionDeniedCode},
		{"sessions", &sessionv1.CreateSessionRequest{Namespace: "a", ActorName: "x"}, 0},
		{"sessions", &sessionv1.CreateSessionRequest{Namespace: "b", ActorName: "x"}, errs.PermissionDeniedCode},
		{"sessions", &sessionv1.ListSessionsRequest{}, errs.PermissionDeniedCode},
		{"plans", &planv1.HistoryRequest{PlanId: ids.New()}, errs.NotFoundCode},
	})
	readerA := &x509.Certificate{}
	readerA.URIs = append(readerA.URIs, mustURL(t, "spiffe://example.org/reader-a"))
	screenRequests(t, g, replies, readerA, []remoteRequest{
		{"sessions", get(inA), 0},
		{"sessions", app(inA), errs.PermissionDeniedCode},
	})
	for name, cert := range map[string]*x509.Certificate{
		"a principal of every grant": {DNSNames: []string{"all.example"}},
		"a node of the deployment":   {DNSNames: []string{"node-2.example"}},
		"no certificate":             nil,
	} {
		t.Run(name, func(t *testing.T) {
			screenRequests(t, g, replies, cert, []remoteRequest{
				{"sessions", get(inB), 0}, {"sessions", del(inA), 0}, {"sessions", &sessionv1.ListSessionsRequest{}, 0},
			})
		})
	}

	// In a cluster, requests to a session's activation are decided too;
	// a member's (a certificate naming nobody) are delivered.
	g.cluster = true
	grain := "partition-activator/" + inB + "$1"
	screenRequests(t, g, replies, writerA, []remoteRequest{{grain, app(inB), errs.NotFoundCode}, {grain, get(inA), 0}})
	screenRequests(t, g, replies, &x509.Certificate{DNSNames: []string{"node-2.example"}}, []remoteRequest{{grain, app(inB), 0}})
	g.cluster = false

	// Identities reloaded apply to the next batch: writer-a removed, its
	// certificate names nobody and is trusted as a node's.
	fewer, err := parseIdentities([]byte(`{"principals":[{"name":"reader-a","uri_sans":["spiffe://example.org/reader-a"],"grants":[{"namespace":"a","role":"reader"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	auth.swap(fewer)
	screenRequests(t, g, replies, readerA, []remoteRequest{{"sessions", app(inA), errs.PermissionDeniedCode}})
}

// Until the node's identities are in place, a peer whose certificate
// names a principal is refused UNAVAILABLE; a member's goes through.
func TestRemotePeersWaitForTheIdentities(t *testing.T) {
	g, replies := newTestGuard()
	var err error
	if g.pending, err = parseIdentities([]byte(`{"principals":[{"name":"x","dns_sans":["x.example"]}]}`)); err != nil {
		t.Fatal(err)
	}
	get := &sessionv1.GetSessionRequest{SessionId: ids.New()}
	screenRequests(t, g, replies, &x509.Certificate{DNSNames: []string{"x.example"}}, []remoteRequest{{"sessions", get, errs.UnavailableCode}})
	screenRequests(t, g, replies, &x509.Certificate{DNSNames: []string{"node-2.example"}}, []remoteRequest{{"sessions", get, 0}})
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A principal peer's requests carry its name in the header the owners'
// audit entries read (principal.Header), over any name the peer wrote
// there; a node of the deployment's header is its own (a member forwards
// the principal it authenticated).
func TestRemotePeersCannotNameAnotherPrincipal(t *testing.T) {
	idents, err := parseIdentities([]byte(`{"principals":[
		{"name":"writer-a","dns_sans":["writer-a.example"],"grants":[{"namespace":"*","role":"writer"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	z := &authorizer{rules: apiRules(), sessionNamespace: func(context.Context, string) (string, error) { return "a", nil }}
	auth := newAuthenticatorWith(idents, nil, newMetrics(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	g, _ := newTestGuard()
	g.authz.p.Store(newRemoteAuthz(auth, z))
	headerOf := func(cert *x509.Certificate, forged map[string]string) string {
		t.Helper()
		b := &remote.MessageBatch{TypeNames: []string{"agentstate.session.v1.CreateSessionRequest"},
			Targets: []*actor.PID{{Address: nodeAddr, Id: "sessions"}}, Senders: []*actor.PID{{Address: peerAddr, Id: "future$a"}},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, Sender: 1,
				MessageData:   mustMarshal(t, &sessionv1.CreateSessionRequest{Namespace: "a", ActorName: "x"}),
				MessageHeader: &remote.MessageHeader{HeaderData: forged}}}}
		if err := g.screenAs(context.Background(), b, peerAddr, cert); err != nil || len(b.Envelopes) != 1 {
			t.Fatalf("screen: %v, %d delivered", err, len(b.Envelopes))
		}
		return b.Envelopes[0].GetMessageHeader().GetHeaderData()[principal.Header]
	}
	writerA := &x509.Certificate{DNSNames: []string{"writer-a.example"}}
	if got := headerOf(writerA, map[string]string{principal.Header: "root"}); got != "writer-a" {
		t.Errorf("a principal peer's forged header reached the owner as %q, want writer-a", got)
	}
	if got := headerOf(writerA, nil); got != "writer-a" {
		t.Errorf("a principal peer's request names %q, want writer-a", got)
	}
	node := &x509.Certificate{DNSNames: []string{"node-2.example"}}
	if got := headerOf(node, map[string]string{principal.Header: "alice"}); got != "alice" {
		t.Errorf("a member's forwarded principal reached the owner as %q, want alice", got)
	}
}
