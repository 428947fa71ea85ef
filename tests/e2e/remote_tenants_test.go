package e2e_test

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/client"
	"github.com/agentstate/agentstate/tests/testpki"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRemotePeerIsItsCertificatesPrincipal runs a node with an --auth-file
// and the remote endpoint on mutual TLS. A peer whose certificate names a
// principal (writer of namespace team) has its requests decided by that
// principal's grants: its append to a team session is stored; its append
// to another namespace's session and its delete (an admin's act) are
// refused and change nothing. A peer whose certificate names no principal
// (a node of the deployment) is trusted as the node.
func TestRemotePeerIsItsCertificatesPrincipal(t *testing.T) {
	a := testpki.New(t)
	nodeCert, nodeKey := a.Leaf(t, "node")
	tenantCert, tenantKey := a.ClientLeaf(t, "tenant", []string{"tenant.example"}, nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "identities.json")
	writeFile(t, path, `{"principals":[
  {"name":"root","token_sha256":["`+tokenHash("root-token")+`"],"operator":true,"grants":[{"namespace":"*","role":"admin"}]},
  {"name":"tenant","dns_sans":["tenant.example"],"grants":[{"namespace":"team","role":"writer"}]}]}`)
	n := startNode(t, "--auth-file", path,
		"--tls-cert", nodeCert, "--tls-key", nodeKey, "--tls-client-ca", a.CA,
		"--remote-addr", "127.0.0.1:0", "--remote-tls-cert", nodeCert, "--remote-tls-key", nodeKey, "--remote-tls-ca", a.CA)
	remoteAddr := n.addrs["remote_addr"]
	pool, err := client.LoadCertPool(a.CA)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(n.grpcAddr(), client.Options{Token: "root-token", RootCAs: pool, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ss := sessionv1.NewSessionServiceClient(conn)
	ctx := ctxT(t)
	create := func(ns string) string {
		cr, err := ss.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "remote", Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		return cr.GetSession().GetSessionId()
	}
	team, other, forNode := create("team"), create("other"), create("other")

	// send sends batches on a stream of a peer presenting cert, then a
	// malformed batch: batches are screened in order, so once the stream
	// ends every batch before it has been decided.
	send := func(cert, key string, batches ...*remote.MessageBatch) {
		t.Helper()
		stream, sc, err := rawStream(t, remoteAddr, a.CA, []tls.Certificate{loadPair(t, cert, key)})
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		if _, err := connect(stream); err != nil {
			t.Fatal(err)
		}
		bad := oneEnvelope(&actor.PID{Address: remoteAddr, Id: "sessions"}, "agentstate.session.v1.GetSessionRequest", nil)
		bad.Envelopes[0].TypeId = 7
		for _, b := range append(batches, bad) {
			if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}); err != nil {
				t.Fatal(err)
			}
		}
		for {
			if _, err := stream.Recv(); err != nil {
				if status.Code(err) != codes.InvalidArgument {
					t.Fatalf("the stream ended with %v, want INVALID_ARGUMENT (the malformed batch)", err)
				}
				return
			}
		}
	}
	sessions := &actor.PID{Address: remoteAddr, Id: "sessions"}
	// asked is a request with a sender at the peer's declared address (the
	// node serves requests, not bare messages; its answers find nobody).
	asked := func(typeName string, data []byte) *remote.MessageBatch {
		b := oneEnvelope(sessions, typeName, data)
		b.Senders = []*actor.PID{{Address: "127.0.0.1:1", Id: "future$1"}}
		b.Envelopes[0].Sender = 1
		return b
	}
	appendTo := func(id, content string) *remote.MessageBatch {
		return asked("agentstate.session.v1.AppendRequest", mustMarshal(t, &sessionv1.AppendRequest{SessionId: id,
			Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: content}}}))
	}
	send(tenantCert, tenantKey,
		appendTo(other, "not theirs"),
		asked("agentstate.session.v1.DeleteSessionRequest", mustMarshal(t, &sessionv1.DeleteSessionRequest{SessionId: team})),
		appendTo(team, "theirs"))
	send(nodeCert, nodeKey, appendTo(forNode, "a node's"))

	_, metrics := n.httpGet("/metrics")
	if want := `agentstate_remote_rejected_total{reason="unauthorized"} 2`; !strings.Contains(metrics, want) {
		t.Fatalf("/metrics lacks %q:\n%s", want, grepLines(metrics, "remote_rejected"))
	}
	waitMessages := func(id, content string) {
		t.Helper()
		for {
			r, err := ss.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: id})
			if err != nil {
				t.Fatalf("session %s: %v", id, err)
			}
			if len(r.GetMessages()) == 1 && r.GetMessages()[0].GetContent() == content {
				return
			}
			if len(r.GetMessages()) > 0 || ctx.Err() != nil {
				t.Fatalf("session %s holds %v (%v), want only %q", id, r.GetMessages(), ctx.Err(), content)
			}
			waitBriefly(ctx)
		}
	}
	waitMessages(team, "theirs") // the team session exists still: the delete was refused
	waitMessages(forNode, "a node's")
	r, err := ss.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: other})
	if err != nil || len(r.GetMessages()) != 0 {
		t.Fatalf("the other namespace's session: %v, %v; want it untouched", r.GetMessages(), err)
	}
}
