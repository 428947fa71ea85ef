package client_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/node/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// refusing answers UpdateState and TailSession with typed errors, as the
// node does.
type refusing struct {
	sessionv1.UnimplementedSessionServiceServer
	feedv1.UnimplementedFeedServiceServer
}

func (refusing) UpdateState(context.Context, *sessionv1.UpdateStateRequest) (*sessionv1.UpdateStateResponse, error) {
	return nil, errs.FailedPrecondition("expected next sequence 3, the session's is 5")
}

func (refusing) TailSession(*feedv1.TailSessionRequest, grpc.ServerStreamingServer[feedv1.SessionEvent]) error {
	return errs.NotFound("session 01JDQ6Z1V3T9Q2B8W4X5Y6Z7A8 not found")
}

func dialRefusing(t *testing.T) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sessionv1.RegisterSessionServiceServer(srv, refusing{})
	feedv1.RegisterFeedServiceServer(srv, refusing{})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	conn, err := client.Dial(lis.Addr().String(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// What the generated stubs return on a Dial'ed connection matches the errs
// sentinels with errors.Is directly (no errs.From), and is still the gRPC
// status it was.
func TestCallErrorsMatchTheSentinels(t *testing.T) {
	conn := dialRefusing(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := sessionv1.NewSessionServiceClient(conn).UpdateState(ctx, &sessionv1.UpdateStateRequest{SessionId: "x"})
	if !errors.Is(err, errs.ErrFailedPrecondition) || errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("unary: %v (%T) does not match only errs.ErrFailedPrecondition", err, err)
	}
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("unary: status code %v", status.Code(err))
	}
	var se *client.StatusError
	if !errors.As(err, &se) || se.Code() != errs.FailedPreconditionCode {
		t.Errorf("unary: %T is not a *client.StatusError of the code", err)
	}
	var e *errs.Error
	if !errors.As(err, &e) || e.Msg != "expected next sequence 3, the session's is 5" {
		t.Errorf("unary: the typed error is %+v", e)
	}

	stream, err := feedv1.NewFeedServiceClient(conn).TailSession(ctx, &feedv1.TailSessionRequest{SessionId: "x"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	if !errors.Is(err, errs.ErrNotFound) || status.Code(err) != codes.NotFound {
		t.Fatalf("stream: %v (%T), code %v", err, err, status.Code(err))
	}

	// The client's own cancellation keeps gRPC's code, and is UNAVAILABLE
	// (nothing applied) in errs.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	_, err = feedv1.NewFeedServiceClient(conn).TailSession(cctx, &feedv1.TailSessionRequest{SessionId: "x"})
	if status.Code(err) != codes.Canceled || !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("cancelled stream: %v (%T), code %v", err, err, status.Code(err))
	}
}
