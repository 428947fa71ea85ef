package client

import (
	"context"
	"sync"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// StreamClient appends over AppendStream streams. It is safe for
// concurrent use: each Append takes an idle stream (or opens one), makes
// one round trip on it and gives it back, so there are as many streams as
// appends were ever in flight at once.
//
// Invariant: a stream in free has no request outstanding, so the next
// response on it answers the next request sent. A stream whose round trip
// did not finish cleanly (a send or receive error, a context that ended
// first) is never put back.
type StreamClient struct {
	api  sessionv1.SessionServiceClient
	opts []grpc.CallOption
	// base is the context every stream lives in; Close cancels it.
	base   context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	free   []*stream
	closed bool
}

type stream struct {
	s      grpc.BidiStreamingClient[sessionv1.AppendRequest, sessionv1.AppendStreamResponse]
	cancel context.CancelFunc
}

// NewStreamClient returns a StreamClient calling api; opts go to every stream.
func NewStreamClient(api sessionv1.SessionServiceClient, opts ...grpc.CallOption) *StreamClient {
	base, cancel := context.WithCancel(context.Background())
	return &StreamClient{api: api, opts: opts, base: base, cancel: cancel}
}

// Append appends req and returns its response, or its error: the node's
// typed error for the request (an *errs.Error, which carries its gRPC
// status); UNAVAILABLE when it was not sent (no stream could be opened, or
// the stream had ended before the send: nothing stored); OUTCOME_UNKNOWN
// when it was sent and the stream failed or ctx ended before the answer —
// the append may have committed then; a retry with the same message ids is
// safe either way (the node answers it with the original sequences).
func (c *StreamClient) Append(ctx context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	st, err := c.take(ctx)
	if err != nil {
		return nil, err
	}
	// An ended ctx cancels the stream, which ends a blocked Recv; the
	// stream is then dropped, as it may still deliver this response.
	stop := context.AfterFunc(ctx, st.cancel)
	out, sent, err := roundTrip(st, req)
	switch ended := !stop(); {
	case err != nil && !sent:
		st.cancel()
		return nil, notSent(err)
	case ended && err != nil:
		return nil, errs.OutcomeUnknown("no append answer before the deadline: %v", context.Cause(ctx))
	case err != nil:
		st.cancel()
		return nil, errs.OutcomeUnknown("append stream failed before the answer: %v", err)
	case ended:
		// Answered, but the stream is cancelled: not reusable.
	default:
		c.give(st)
	}
	return decode(out)
}

// roundTrip sends req on st and receives its answer; sent reports whether
// req was handed to the transport. grpc-go's Send fails only before it
// queues the message (a stream that already ended: a stale one after a
// node restart, or one the node refused), so a failed Send sent nothing.
func roundTrip(st *stream, req *sessionv1.AppendRequest) (_ *sessionv1.AppendStreamResponse, sent bool, _ error) {
	if err := st.s.Send(req); err != nil {
		// The stream's real status comes from Recv.
		if _, rerr := st.s.Recv(); rerr != nil {
			return nil, false, rerr
		}
		return nil, false, err
	}
	out, err := st.s.Recv()
	return out, true, err
}

// notSent is the error of an append whose stream ended before it was
// sent: the node's refusal of the whole stream (no or a wrong token, a
// node without the rpc), which a retry does not cure, or UNAVAILABLE.
func notSent(cause error) error {
	switch status.Code(cause) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.Unimplemented:
		return errs.From(cause)
	}
	return errs.Unavailable("append not sent: append stream ended: %v", cause)
}

// take returns an idle stream, or opens one.
func (c *StreamClient) take(ctx context.Context) (*stream, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errs.Unavailable("append stream client is closed")
	}
	if n := len(c.free); n > 0 {
		st := c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
		c.mu.Unlock()
		return st, nil
	}
	c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, errs.Unavailable("append not sent: %v", err)
	}
	sctx, cancel := context.WithCancel(c.base)
	s, err := c.api.AppendStream(sctx, c.opts...)
	if err != nil {
		// Opening a stream sends no append.
		cancel()
		return nil, notSent(err)
	}
	return &stream{s: s, cancel: cancel}, nil
}

// give puts a stream back for the next Append.
func (c *StreamClient) give(st *stream) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		st.cancel()
		return
	}
	c.free = append(c.free, st)
	c.mu.Unlock()
}

// Close ends every stream: idle ones are closed, appends in flight fail
// with the stream's cancellation. Later Appends are refused.
func (c *StreamClient) Close() {
	c.mu.Lock()
	c.closed = true
	free := c.free
	c.free = nil
	c.mu.Unlock()
	for _, st := range free {
		_ = st.s.CloseSend()
		st.cancel()
	}
	c.cancel()
}

// decode is the client side of the server's outcome: the response, or the
// request's typed error.
func decode(out *sessionv1.AppendStreamResponse) (*sessionv1.AppendResponse, error) {
	switch o := out.GetOutcome().(type) {
	case *sessionv1.AppendStreamResponse_Response:
		return o.Response, nil
	case *sessionv1.AppendStreamResponse_Error:
		return nil, errs.FromProto(o.Error)
	}
	return nil, errs.Internal("append outcome carries neither a response nor an error")
}
