package server

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// rawCodec sends and receives bytes as they are, so a test can put on the
// wire what no generated client would encode.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// receivingSessions implements nothing but reads the first message of a
// client stream, as the real ImportStream does: the decoding of a client
// stream's messages happens when its handler receives them.
type receivingSessions struct {
	sessionv1.UnimplementedSessionServiceServer
}

func (receivingSessions) ImportStream(s grpc.ClientStreamingServer[sessionv1.ImportChunk, sessionv1.ImportSessionResponse]) error {
	_, err := s.Recv()
	return err
}

// servedAPI serves the gRPC API (with services that implement nothing:
// an undecodable request must not reach them) on a loopback port.
func servedAPI(t *testing.T) (*apiServer, *grpc.ClientConn) {
	t.Helper()
	a, addr := serveAPI(t, apiServices{
		Sessions: receivingSessions{},
		Plans:    planv1.UnimplementedPlanServiceServer{},
		Audit:    auditv1.UnimplementedAuditServiceServer{},
	}, apiOptions{MaxRecvBytes: 1 << 20})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return a, conn
}

// callRaw sends body as the one request of method and returns the error
// the call ends with.
func callRaw(ctx context.Context, conn *grpc.ClientConn, method string, clientStreams, serverStreams bool, body []byte) error {
	if !clientStreams && !serverStreams {
		var out []byte
		return conn.Invoke(ctx, method, &body, &out)
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: clientStreams, ServerStreams: serverStreams}, method)
	if err != nil {
		return err
	}
	if err := s.SendMsg(&body); err != nil && err != io.EOF {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		var out []byte
		if err := s.RecvMsg(&out); err != nil {
			return err
		}
	}
}

func wantUndecodable(t *testing.T, what string, err error, mention string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), mention) {
		t.Errorf("%s: got %v %q, want INVALID_ARGUMENT mentioning %q", what, st.Code(), st.Message(), mention)
	}
}

// Bytes that are not a protobuf message, sent to every method the API
// serves (unary and streaming, agentstate's services and the standard
// ones), are INVALID_ARGUMENT naming the request type, not INTERNAL.
func TestUndecodableRequestIsInvalidArgumentOnEveryMethod(t *testing.T) {
	a, conn := servedAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Field 1, length-delimited, 5 bytes long, of which 1 is there.
	garbage := []byte{0x0a, 0x05, 'x'}
	methods := 0
	for svc, info := range a.srv.GetServiceInfo() {
		for _, m := range info.Methods {
			methods++
			method := fmt.Sprintf("/%s/%s", svc, m.Name)
			err := callRaw(ctx, conn, method, m.IsClientStream, m.IsServerStream, garbage)
			wantUndecodable(t, method, err, "could not be decoded")
		}
	}
	if methods < 20 {
		t.Fatalf("only %d methods served; the services were not registered", methods)
	}
}

// A string field that is not UTF-8 (which proto3 forbids) is
// INVALID_ARGUMENT naming the field, through grpc's own decoder (Append,
// AppendStream) and through the codec's generated one (AppendBatches).
func TestInvalidUTF8RequestIsInvalidArgument(t *testing.T) {
	_, conn := servedAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// AppendRequest with session_id (field 1) = 0xff.
	badAppend := []byte{0x0a, 0x01, 0xff}
	badBatch, err := (&sessionv1.AppendBatch{Appends: []*sessionv1.TaggedAppend{
		{Tag: 1, Request: &sessionv1.AppendRequest{SessionId: "\xff"}}}}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	svc := "/" + sessionv1.SessionService_ServiceDesc.ServiceName + "/"
	wantUndecodable(t, "Append", callRaw(ctx, conn, svc+"Append", false, false, badAppend), "UTF-8")
	wantUndecodable(t, "AppendStream", callRaw(ctx, conn, svc+"AppendStream", true, true, badAppend), "UTF-8")
	wantUndecodable(t, "AppendBatches", callRaw(ctx, conn, svc+"AppendBatches", true, true, badBatch), "UTF-8")
}
