package cluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The hostile peer of these tests is the test process itself, speaking the
// remote protocol over a bare gRPC stream (no actor system of its own):
// the members are separate processes.

// health is what a member's automanaged port says about it.
type health struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Port    int    `json:"port"`
}

func memberHealth(t *testing.T, m *member) health {
	t.Helper()
	resp, err := http.Get("http://" + m.amAddr + "/_health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h health) remoteAddr() string { return net.JoinHostPort(h.Address, strconv.Itoa(h.Port)) }

// hostileStream opens a Remoting stream to addr (creds: the transport)
// and declares the peer address "127.0.0.1:1".
func hostileStream(t *testing.T, addr string, creds credentials.TransportCredentials) (remote.Remoting_ReceiveClient, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	stream, err := remote.NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		return nil, err
	}
	err = stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "hostile", Address: "127.0.0.1:1"}},
	}}})
	if err == nil {
		_, err = stream.Recv()
	}
	return stream, err
}

func send(t *testing.T, stream remote.Remoting_ReceiveClient, b *remote.MessageBatch) {
	t.Helper()
	if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// forgedLeave is gossip, as if from a member, saying that the member id
// left the cluster gracefully: the library then blocks id for good.
func forgedLeave(t *testing.T, to, id string) *remote.MessageBatch {
	t.Helper()
	empty, err := anypb.New(&emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := proto.Marshal(&cluster.GossipRequest{FromMemberId: "forger", State: &cluster.GossipState{
		Members: map[string]*cluster.GossipMemberState{id: {Values: map[string]*cluster.GossipKeyValue{
			"left": {SequenceNumber: 1 << 40, Value: empty, LocalTimestampUnixMilliseconds: time.Now().UnixMilli()},
		}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return &remote.MessageBatch{TypeNames: []string{"cluster.GossipRequest"},
		Targets:   []*actor.PID{{Address: to, Id: "gossip"}},
		Envelopes: []*remote.MessageEnvelope{{MessageData: data}}}
}

func readyz(t *testing.T, m *member) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + m.HTTPAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func metricOf(t *testing.T, m *member, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + m.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// TestForgedGossipSplitIsReported: gossip saying "member 1 left", which a
// peer of the plaintext loopback cluster forges, blocks member 1 at member
// 0 for good: member 0 is alone while member 1 is up. It used to go on
// serving as the whole cluster, /readyz 200, silent at the default log
// level. Now member 0 reports not ready, saying why, and logs a WARN. (With
// mutual TLS the forger cannot send at all: TestClusterAdmitsOnlyItsCA.)
func TestForgedGossipSplitIsReported(t *testing.T) {
	dsn := database(t)
	ctx := runContext(t)
	ms := startClusterArgs(t, ctx, dsn, []string{"--log-format", "json"}, "S", "S")
	h0, h1 := memberHealth(t, ms[0]), memberHealth(t, ms[1])
	stream, err := hostileStream(t, h0.remoteAddr(), insecure.NewCredentials())
	if err != nil {
		t.Fatal(err)
	}
	send(t, stream, forgedLeave(t, h0.remoteAddr(), h1.ID))

	poll := time.NewTicker(100 * time.Millisecond) // the member is another process: its /readyz is polled
	defer poll.Stop()
	deadline := time.After(60 * time.Second)
	for {
		code, body := readyz(t, ms[0])
		if code == http.StatusServiceUnavailable && strings.Contains(body, "cluster split") {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("member 0 /readyz still %d %q a minute after the forged leave", code, body)
		case <-poll.C:
		}
	}
	if !strings.Contains(ms[0].LogTail(1<<20), `"level":"WARN","msg":"cluster split`) {
		t.Fatalf("member 0 logged no WARN about the split:\n%s", ms[0].LogTail(4000))
	}
	if code, body := readyz(t, ms[1]); code != http.StatusOK {
		t.Logf("member 1 /readyz: %d %s", code, body)
	}
}

// TestForgedRepliesAreDropped: a peer of the plaintext loopback cluster
// sprays forged replies (an append acknowledged at a sequence never
// stored) at member 0's futures, whose ids are a counter, while clients
// append through member 0 to sessions of both members. Member 0 used to
// deliver such replies to its waiting requests (hundreds of forged
// acknowledgements in 30 s); now it accepts a reply only from the member
// its request went to: every forged one is dropped and counted, and no
// client sees a forged acknowledgement.
func TestForgedRepliesAreDropped(t *testing.T) {
	dsn := database(t)
	ctx := runContext(t)
	ms := startCluster(t, ctx, dsn, "R", "R")
	h0 := memberHealth(t, ms[0])
	const forged = 1 << 40
	reply, err := proto.Marshal(&sessionv1.AppendResponse{NextSequence: forged + 1,
		Messages: []*sessionv1.AppendedMessage{{Sequence: forged}}})
	if err != nil {
		t.Fatal(err)
	}

	callCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	api := sessionv1.NewSessionServiceClient(ms[0].conn)
	var sessions []string
	for i := 0; i < 8; i++ {
		sid := ids.New()
		if _, err := api.Create(callCtx, &sessionv1.CreateSessionRequest{SessionId: sid, ActorName: "forged-replies"}, grpc.WaitForReady(true)); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, sid)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	acked := 0
	for _, sid := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for want := int64(0); ; want++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := api.Append(callCtx, &sessionv1.AppendRequest{SessionId: sid,
					Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "m", MessageId: ids.New()}}})
				mu.Lock()
				switch {
				case err != nil:
					bad = append(bad, fmt.Sprintf("%s: %v", sid, err))
				case resp.GetMessages()[0].GetSequence() != want:
					bad = append(bad, fmt.Sprintf("%s: acked at sequence %d, want %d", sid, resp.GetMessages()[0].GetSequence(), want))
				default:
					acked++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}

	stream, err := hostileStream(t, h0.remoteAddr(), insecure.NewCredentials())
	if err != nil {
		t.Fatal(err)
	}
	const perBatch, batches = 5000, 20
	for k := 0; k < batches; k++ {
		b := &remote.MessageBatch{TypeNames: []string{"agentstate.session.v1.AppendResponse"}}
		for i := 0; i < perBatch; i++ {
			b.Targets = append(b.Targets, &actor.PID{Address: h0.remoteAddr(), Id: "future$" + strconv.Itoa(1+k*perBatch+i)})
			b.Envelopes = append(b.Envelopes, &remote.MessageEnvelope{Target: int32(i), MessageData: reply})
		}
		send(t, stream, b)
	}
	// The count reaches the total once every batch was screened; the
	// member is another process: its metrics are polled.
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	deadline := time.After(60 * time.Second)
	for metricOf(t, ms[0], `agentstate_remote_rejected_total{reason="reply_not_from_requestee"}`) < perBatch*batches {
		select {
		case <-deadline:
			t.Fatalf("forged replies dropped: %v, want %d", metricOf(t, ms[0], `agentstate_remote_rejected_total{reason="reply_not_from_requestee"}`), perBatch*batches)
		case <-poll.C:
		}
	}
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d bad acknowledgements (of %d good), e.g. %s", len(bad), acked, bad[0])
	}
	if acked == 0 {
		t.Fatal("no append was acknowledged during the attack")
	}
	t.Logf("%d appends acknowledged during %d forged replies", acked, perBatch*batches)
}

// TestClusterAdmitsOnlyItsCA: members with certificates of the cluster's
// CA form the cluster and serve a session from both; a peer without a
// certificate, or with one of another CA, gets no stream at all, so its
// forged gossip never arrives and the members stay ready.
func TestClusterAdmitsOnlyItsCA(t *testing.T) {
	dsn := database(t)
	ctx := runContext(t)
	p := newClusterPKI(t)
	ms := startClusterArgs(t, ctx, dsn, p.mtlsFlags(), "T", "T")
	callCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sid := ids.New()
	if _, err := sessionv1.NewSessionServiceClient(ms[0].conn).Create(callCtx,
		&sessionv1.CreateSessionRequest{SessionId: sid, ActorName: "mtls"}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		resp, err := sessionv1.NewSessionServiceClient(m.conn).Append(callCtx, &sessionv1.AppendRequest{SessionId: sid,
			Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "hi", MessageId: ids.New()}}}, grpc.WaitForReady(true))
		if err != nil || resp.GetMessages()[0].GetSequence() != int64(i) {
			t.Fatalf("append via member %d over mutual TLS: %v, %v", i, resp, err)
		}
	}

	pem, err := os.ReadFile(p.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	rogue, err := tls.LoadX509KeyPair(p.RogueCert, p.RogueKey)
	if err != nil {
		t.Fatal(err)
	}
	h0, h1 := memberHealth(t, ms[0]), memberHealth(t, ms[1])
	for name, creds := range map[string]credentials.TransportCredentials{
		"plaintext":             insecure.NewCredentials(),
		"no client certificate": credentials.NewTLS(&tls.Config{RootCAs: pool}),
		"another CA":            credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{rogue}}),
	} {
		stream, err := hostileStream(t, h0.remoteAddr(), creds)
		if err == nil {
			// A stream that opened anyway must not carry the forgery.
			err = stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: forgedLeave(t, h0.remoteAddr(), h1.ID)}})
			if err == nil {
				_, err = stream.Recv()
			}
		}
		if err == nil {
			t.Errorf("%s: member 0 accepted a remote stream", name)
		}
	}
	// Both members still see each other and are ready.
	for i, m := range ms {
		if code, body := readyz(t, m); code != http.StatusOK {
			t.Errorf("member %d /readyz %d %s", i, code, body)
		}
	}
}
