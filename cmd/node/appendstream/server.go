package appendstream

import (
	"context"
	"errors"
	"io"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc"
)

// Server is a sessionv1.SessionServiceServer that serves AppendStream with
// the embedded server's Append; every other rpc is the embedded server's.
type Server struct {
	sessionv1.SessionServiceServer
	// Mark, when set, marks the context every append of a stream runs
	// with (the node's audit.NoWait: a full backlog refuses a network
	// sender's append with RESOURCE_EXHAUSTED instead of holding it).
	Mark func(context.Context) context.Context
	// Observe, when set, is told each append's outcome (metrics). It is
	// called on the stream's goroutine and must not block.
	Observe func(*sessionv1.AppendResponse, error)
}

// AppendStream serves the stream's requests one after another: Append,
// then send its response or its error. It returns nil when the client
// closes its side, or the stream's error when receiving or sending fails;
// a request's own failure never ends the stream.
func (s *Server) AppendStream(stream grpc.BidiStreamingServer[sessionv1.AppendRequest, sessionv1.AppendStreamResponse]) error {
	ctx := stream.Context()
	if s.Mark != nil {
		ctx = s.Mark(ctx)
	}
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := s.Append(ctx, req)
		if s.Observe != nil {
			s.Observe(resp, err)
		}
		if err := stream.Send(outcome(resp, err)); err != nil {
			return err
		}
	}
}

// decode is the client side of outcome: the response, or the request's
// typed error.
func decode(out *sessionv1.AppendStreamResponse) (*sessionv1.AppendResponse, error) {
	switch o := out.GetOutcome().(type) {
	case *sessionv1.AppendStreamResponse_Response:
		return o.Response, nil
	case *sessionv1.AppendStreamResponse_Error:
		return nil, errs.FromProto(o.Error)
	}
	return nil, errs.Internal("append outcome carries neither a response nor an error")
}

func outcome(resp *sessionv1.AppendResponse, err error) *sessionv1.AppendStreamResponse {
	if err != nil {
		return &sessionv1.AppendStreamResponse{Outcome: &sessionv1.AppendStreamResponse_Error{Error: errs.ToProto(err)}}
	}
	return &sessionv1.AppendStreamResponse{Outcome: &sessionv1.AppendStreamResponse_Response{Response: resp}}
}
