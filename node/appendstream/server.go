package appendstream

import (
	"context"
	"errors"
	"io"
	"sync"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc"
)

// Server is a sessionv1.SessionServiceServer that serves AppendStream with
// the embedded server's Append; every other rpc is the embedded server's.
type Server struct {
	sessionv1.SessionServiceServer
	// Mark, when set, marks the context every append of a stream runs
	// with (the node's writer.NoWait: a full backlog refuses a network
	// sender's append with RESOURCE_EXHAUSTED instead of holding it).
	Mark func(context.Context) context.Context
	// Observe, when set, is told each append's outcome (metrics). It is
	// called on the goroutine that decided the outcome (for AppendBatches,
	// often a session actor's) and must not block.
	Observe func(*sessionv1.AppendResponse, error)
	// Draining, when set, is closed when the node starts shutting down.
	// Every open stream then ends promptly instead of holding the
	// shutdown for its whole timeout: appends it had accepted are
	// answered with their outcome, an append that arrives after is
	// answered UNAVAILABLE without being served (nothing stored), and the
	// stream ends with UNAVAILABLE (errDraining); whatever the client
	// sent that was not answered was not stored either.
	Draining <-chan struct{}
	// Limits bound what one AppendBatches stream may hold (zero fields:
	// the defaults).
	Limits Limits
	// OnStall, when set, is called with a stream's context when the
	// stream ends because its outcomes were not read (the node closes the
	// client's connection: the ended stream's unread outcomes stay queued
	// in the transport until the client reads or the connection closes).
	OnStall func(context.Context)

	// sharedRoom is what all streams share (Limits.TotalAppends,
	// TotalBytes), made on first use.
	sharedOnce sync.Once
	sharedRoom *shared
}

// errDraining ends a stream when the node shuts down.
func errDraining() error {
	return errs.Unavailable("the node is shutting down: this stream ends; appends it did not answer were not stored, retry them on another node or after the restart")
}

// received is one result of a stream's Recv.
type received[T any] struct {
	msg *T
	err error
}

// receive reads stream messages on a goroutine of its own, so that the
// handler can wait for the next message and for Draining at once. The
// goroutine ends at the stream's end (after the handler returned, gRPC
// fails the pending Recv) or when done is closed.
func receive[T any](recv func() (*T, error), done <-chan struct{}) <-chan received[T] {
	ch := make(chan received[T])
	go func() {
		for {
			m, err := recv()
			select {
			case ch <- received[T]{m, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// AppendStream serves the stream's requests one after another: Append,
// then send its response or its error. It returns nil when the client
// closes its side, or the stream's error when receiving or sending fails;
// a request's own failure never ends the stream.
//
// When Draining closes, the append being served is answered first; an
// append already received but not started is answered UNAVAILABLE; then
// the stream ends with errDraining.
func (s *Server) AppendStream(stream grpc.BidiStreamingServer[sessionv1.AppendRequest, sessionv1.AppendStreamResponse]) error {
	ctx := stream.Context()
	if s.Mark != nil {
		ctx = s.Mark(ctx)
	}
	done := make(chan struct{})
	defer close(done)
	reqs := receive(stream.Recv, done)
	for {
		var r received[sessionv1.AppendRequest]
		select {
		case r = <-reqs:
		case <-s.Draining: // nil without Draining: never
			return s.refuseWaiting(stream, reqs)
		}
		if errors.Is(r.err, io.EOF) {
			return nil
		}
		if r.err != nil {
			return r.err
		}
		if s.draining() {
			// Draining closed while this append was being received:
			// it is not served.
			if err := stream.Send(outcome(nil, errDraining())); err != nil {
				return err
			}
			return errDraining()
		}
		resp, err := s.Append(ctx, r.msg)
		if s.Observe != nil {
			s.Observe(resp, err)
		}
		if err := stream.Send(outcome(resp, err)); err != nil {
			return err
		}
	}
}

// draining says whether Draining is closed.
func (s *Server) draining() bool {
	select {
	case <-s.Draining:
		return true
	default:
		return false
	}
}

// refuseWaiting answers UNAVAILABLE to an append the receiver already
// holds, if any, and returns errDraining. An append the client sends
// later is never read: the stream's end tells it nothing more was stored.
func (s *Server) refuseWaiting(stream grpc.BidiStreamingServer[sessionv1.AppendRequest, sessionv1.AppendStreamResponse],
	reqs <-chan received[sessionv1.AppendRequest]) error {
	select {
	case r := <-reqs:
		if r.err == nil {
			if err := stream.Send(outcome(nil, errDraining())); err != nil {
				return err
			}
		}
	default:
	}
	return errDraining()
}

func outcome(resp *sessionv1.AppendResponse, err error) *sessionv1.AppendStreamResponse {
	if err != nil {
		return &sessionv1.AppendStreamResponse{Outcome: &sessionv1.AppendStreamResponse_Error{Error: errs.ToProto(err)}}
	}
	return &sessionv1.AppendStreamResponse{Outcome: &sessionv1.AppendStreamResponse_Response{Response: resp}}
}
