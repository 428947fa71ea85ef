package e2e_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The peer: this test binary, re-run with peerEnv set, is a real
// Proto.Actor node (one remote in its own process) that talks to the node
// under test over mutual TLS. It prints one JSON object per request on
// stdout; the test (remote_test.go) judges them.
const (
	peerEnv     = "E2E_REMOTE_PEER" // the node's remote address
	peerSession = "E2E_PEER_SESSION"
	peerCert    = "E2E_PEER_CERT"
	peerKey     = "E2E_PEER_KEY"
	peerCA      = "E2E_PEER_CA"
)

// peerResult is what the peer reports for one request.
type peerResult struct {
	Step  string `json:"step"`
	Type  string `json:"type"` // full name of the reply's message type
	Code  string `json:"code,omitempty"`
	Msg   string `json:"message,omitempty"`
	Err   string `json:"err,omitempty"`
	Value string `json:"value,omitempty"` // a field of a normal reply the test checks
}

// unlinkedMessage builds, at run time, a message of a type no binary
// links: agentstate.hostile.v1.Unlinked. The unguarded library crashes
// the receiving node on it.
func unlinkedMessage() (proto.Message, error) {
	fdp := &descriptorpb.FileDescriptorProto{
		Name: proto.String("hostile/v1/hostile.proto"), Package: proto.String("agentstate.hostile.v1"),
		Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Unlinked"),
			Field: []*descriptorpb.FieldDescriptorProto{{
				Name: proto.String("payload"), JsonName: proto.String("payload"), Number: proto.Int32(1),
				Type:  descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
				Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			}},
		}},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		return nil, err
	}
	md := fd.Messages().ByName("Unlinked")
	m := dynamicpb.NewMessage(md)
	m.Set(md.Fields().ByName("payload"), protoreflect.ValueOfString("boom"))
	return m, nil
}

// clippedTarget is an actor id that no node exposes, long enough that the
// guard clips "address/id" in its refusal, with the clip point pad bytes
// into a "€".
func clippedTarget(addr string, pad int) string {
	return strings.Repeat("x", 120-len(addr)-1-pad) + strings.Repeat("€", 20)
}

func runPeer() int {
	nodeAddr := os.Getenv(peerEnv)
	cert, err := tls.LoadX509KeyPair(os.Getenv(peerCert), os.Getenv(peerKey))
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		return 2
	}
	pem, err := os.ReadFile(os.Getenv(peerCA))
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		return 2
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	server := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	client := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0,
		remote.WithServerOptions(grpc.Creds(credentials.NewTLS(server))),
		remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(client)))))
	r.Start()

	unlinked, err := unlinkedMessage()
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		return 2
	}
	sessions := actor.NewPID(nodeAddr, "sessions")
	steps := []struct {
		name string
		to   *actor.PID
		msg  proto.Message
	}{
		{"unlinked", sessions, unlinked},
		{"poison", sessions, &actor.PoisonPill{}},
		{"get", sessions, &sessionv1.GetSessionRequest{SessionId: os.Getenv(peerSession)}},
		{"append", sessions, &sessionv1.AppendRequest{SessionId: os.Getenv(peerSession), Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_USER, Content: "over the remote"}}}},
		{"plan", actor.NewPID(nodeAddr, "plans"), &planv1.RecordErrorRequest{
			PlanId: "01JDQ6Z1V3T9Q2B8W4X5Y6Z7B9", Phase: planv1.Phase_PHASE_APPLY, ErrorType: "MergeConflict"}},
		{"audit", actor.NewPID(nodeAddr, "audit"), &auditv1.CountRequest{}},
		// Another service's request sent to the audit actor.
		{"audit-wrong-type", actor.NewPID(nodeAddr, "audit"), &sessionv1.GetSessionRequest{SessionId: os.Getenv(peerSession)}},
		// A refused target whose name the guard's reply clips inside a
		// three-byte character (at each of its three bytes, over the three steps).
		{"clipped-0", actor.NewPID(nodeAddr, clippedTarget(nodeAddr, 0)), &auditv1.CountRequest{}},
		{"clipped-1", actor.NewPID(nodeAddr, clippedTarget(nodeAddr, 1)), &auditv1.CountRequest{}},
		{"clipped-2", actor.NewPID(nodeAddr, clippedTarget(nodeAddr, 2)), &auditv1.CountRequest{}},
	}
	enc := json.NewEncoder(os.Stdout)
	for _, s := range steps {
		res := peerResult{Step: s.name}
		reply, err := sys.Root.RequestFuture(s.to, s.msg, 20*time.Second).Result()
		switch v := reply.(type) {
		case nil:
			res.Err = fmt.Sprint(err)
		case *commonv1.Error:
			res.Type, res.Code, res.Msg = string(proto.MessageName(v)), v.GetCode().String(), v.GetMessage()
		case *sessionv1.GetSessionResponse:
			res.Type, res.Value = string(proto.MessageName(v)), v.GetSession().GetSessionId()
		case *sessionv1.AppendResponse:
			res.Type, res.Value = string(proto.MessageName(v)), fmt.Sprint(v.GetMessages()[0].GetSequence())
		case *planv1.RecordErrorResponse:
			res.Type, res.Value = string(proto.MessageName(v)), v.GetRecord().GetCategory().String()
		case *auditv1.CountResponse:
			res.Type, res.Value = string(proto.MessageName(v)), fmt.Sprint(v.GetCount())
		default:
			res.Type = fmt.Sprintf("%T", v)
		}
		if err := enc.Encode(res); err != nil {
			return 2
		}
	}
	// No graceful remote shutdown: the process ends here, and the node
	// must cope with a peer that vanishes.
	return 0
}
