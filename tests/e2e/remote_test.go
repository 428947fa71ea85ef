package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestHostileRemotePeer runs a node with the Proto.Actor remote endpoint
// on mutual TLS and attacks it:
//   - peers without a certificate of the right CA cannot connect;
//   - a raw peer (a bare Remoting stream, no actor system) sends a message
//     type the node does not link (which crashes an unguarded node), a
//     PoisonPill for the sessions directory, and a batch whose tables do
//     not match its envelopes;
//   - a real Proto.Actor peer (a separate process) sends an unlinked type
//     and a PoisonPill as requests, then normal requests to all three
//     actors.
//
// The node must stay up, answer the hostile requests with INVALID_ARGUMENT,
// answer the normal ones, keep serving gRPC, and exit 0 on SIGTERM.
func TestHostileRemotePeer(t *testing.T) {
	p := newPKI(t)
	n := startNode(t, "--remote-addr", "127.0.0.1:0",
		"--remote-tls-cert", p.NodeCert, "--remote-tls-key", p.NodeKey, "--remote-tls-ca", p.CA)
	remoteAddr := n.addrs["remote_addr"]
	if remoteAddr == "" {
		t.Fatal("the serving log line has no remote_addr")
	}
	ctx := ctxT(t)
	sessions := sessionv1.NewSessionServiceClient(n.conn())
	cr, err := sessions.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "remote"})
	if err != nil {
		t.Fatal(err)
	}
	sid := cr.GetSession().GetSessionId()

	// Without the right client certificate there is no stream at all.
	for name, certs := range map[string][]tls.Certificate{"no client certificate": nil, "rogue CA": {loadPair(t, p.RogueCert, p.RogueKey)}} {
		stream, conn, err := rawStream(t, remoteAddr, p.CA, certs)
		if err == nil {
			_, err = connect(stream)
		}
		if err == nil {
			t.Errorf("%s: the node accepted the remote stream", name)
		}
		conn.Close()
	}

	// The raw peer, authenticated.
	stream, conn, err := rawStream(t, remoteAddr, p.CA, []tls.Certificate{loadPair(t, p.PeerCert, p.PeerKey)})
	if err != nil {
		t.Fatalf("open a stream with the peer certificate: %v", err)
	}
	defer conn.Close()
	if resp, err := connect(stream); err != nil || resp.GetConnectResponse() == nil {
		t.Fatalf("connect: %v, %v", resp, err)
	}
	target := &actor.PID{Address: remoteAddr, Id: "sessions"}
	get := mustMarshal(t, &sessionv1.GetSessionRequest{SessionId: sid})
	for _, b := range []*remote.MessageBatch{
		// A type nobody links, inside and outside agentstate's packages.
		oneEnvelope(target, "agentstate.hostile.v1.Unlinked", []byte{0x0a, 0x01, 'x'}),
		oneEnvelope(target, "evil.v1.Boom", nil),
		// A system message that would stop the sessions directory.
		oneEnvelope(target, "actor.PoisonPill", nil),
		// A valid request to an actor that is not exposed.
		oneEnvelope(&actor.PID{Address: remoteAddr, Id: "sessions/$1"}, "agentstate.session.v1.GetSessionRequest", get),
	} {
		if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	// Tables that do not match the envelope: the node ends this stream.
	bad := oneEnvelope(target, "agentstate.session.v1.GetSessionRequest", get)
	bad.Envelopes[0].TypeId = 7
	if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: bad}}); err != nil {
		t.Fatalf("send: %v", err)
	}
	// Batches on a stream are handled in order, so once the stream ends
	// every batch above has been screened.
	for {
		_, err := stream.Recv()
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("the malformed batch ended the stream with %v, want INVALID_ARGUMENT", err)
			}
			break
		}
	}
	if !n.alive() {
		t.Fatalf("the node died on the raw peer's batches")
	}

	// The real peer, in its own process.
	results := runRemotePeer(t, remoteAddr, sid, p)
	want := map[string]func(r peerResult) bool{
		"unlinked": func(r peerResult) bool {
			return r.Code == "ERROR_CODE_INVALID_ARGUMENT" && strings.Contains(r.Msg, "agentstate.hostile.v1.Unlinked")
		},
		"poison": func(r peerResult) bool {
			return r.Code == "ERROR_CODE_INVALID_ARGUMENT" && strings.Contains(r.Msg, "actor.PoisonPill")
		},
		"get":    func(r peerResult) bool { return r.Type == "agentstate.session.v1.GetSessionResponse" && r.Value == sid },
		"append": func(r peerResult) bool { return r.Type == "agentstate.session.v1.AppendResponse" && r.Value == "0" },
		"plan": func(r peerResult) bool {
			return r.Type == "agentstate.plan.v1.RecordErrorResponse" && r.Value == "ERROR_CATEGORY_MERGE_CONFLICT"
		},
		"audit": func(r peerResult) bool { return r.Type == "agentstate.audit.v1.CountResponse" && r.Value != "0" },
		"audit-wrong-type": func(r peerResult) bool {
			return r.Code == "ERROR_CODE_INVALID_ARGUMENT" && strings.Contains(r.Msg, "GetSessionRequest")
		},
	}
	for i := 0; i < 3; i++ {
		want[fmt.Sprintf("clipped-%d", i)] = func(r peerResult) bool {
			return r.Code == "ERROR_CODE_INVALID_ARGUMENT" && strings.Contains(r.Msg, "is not served to remote peers")
		}
	}
	for step, ok := range want {
		r, found := results[step]
		if !found || !ok(r) {
			t.Errorf("peer step %s: got %+v", step, r)
		}
	}

	// Still serving gRPC, with the remote append visible, and nothing had
	// to be recovered: the guard stopped everything before the library.
	msgs, err := sessions.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid})
	if err != nil || len(msgs.GetMessages()) != 1 || msgs.GetMessages()[0].GetContent() != "over the remote" {
		t.Fatalf("gRPC after the attack: %v, %v", msgs, err)
	}
	_, metrics := n.httpGet("/metrics")
	for _, want := range []string{
		`agentstate_remote_rejected_total{reason="unknown_type"} 2`,
		`agentstate_remote_rejected_total{reason="type_not_allowed"} 3`,
		`agentstate_remote_rejected_total{reason="target_not_exposed"} 4`,
		`agentstate_remote_rejected_total{reason="malformed"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(metrics, "agentstate_recovered_panics_total{") {
		t.Errorf("a panic had to be recovered:\n%s", grepLines(metrics, "recovered"))
	}
	if code := n.terminate(90 * time.Second); code != 0 {
		t.Fatalf("node exited %d after SIGTERM, want 0", code)
	}
}

func runRemotePeer(t *testing.T, nodeRemote, sid string, p *pki) map[string]peerResult {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(cleanEnv(), peerEnv+"="+nodeRemote, peerSession+"="+sid,
		peerCert+"="+p.PeerCert, peerKey+"="+p.PeerKey, peerCA+"="+p.CA)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("peer: %v\nstdout: %s\nstderr: %s", err, out.String(), errb.String())
	}
	results := map[string]peerResult{}
	dec := json.NewDecoder(&out)
	for dec.More() {
		var r peerResult
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("peer output: %v\n%s", err, out.String())
		}
		results[r.Step] = r
	}
	return results
}

func loadPair(t *testing.T, cert, key string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rawStream opens a Remoting stream to addr over TLS, presenting certs.
func rawStream(t *testing.T, addr, caFile string, certs []tls.Certificate) (remote.Remoting_ReceiveClient, *grpc.ClientConn, error) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(readFile(t, caFile)))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: certs})))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := remote.NewRemotingClient(conn).Receive(ctxT(t))
	return stream, conn, err
}

// connect performs the remote protocol's handshake on stream.
func connect(stream remote.Remoting_ReceiveClient) (*remote.RemoteMessage, error) {
	err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "raw-peer", Address: "127.0.0.1:1"}},
	}}})
	if err != nil {
		return nil, err
	}
	return stream.Recv()
}

// oneEnvelope is a well-formed batch of one message of typeName to target,
// with no sender (so the node has nobody to answer).
func oneEnvelope(target *actor.PID, typeName string, data []byte) *remote.MessageBatch {
	return &remote.MessageBatch{
		TypeNames: []string{typeName},
		Targets:   []*actor.PID{target},
		Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: data}},
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
