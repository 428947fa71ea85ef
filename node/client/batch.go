package client

import (
	"context"
	"sync"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

const (
	// MaxBatchBytes bounds the encoded appends of one AppendBatch, far
	// below a node's receive limit (4 MiB by default). An append larger
	// than this goes alone on an AppendStream stream (StreamClient), which
	// knows whether it was sent, and the node refuses it with its own
	// error if it is too large.
	MaxBatchBytes = 1 << 20
	// maxBatchAppends bounds the appends of one AppendBatch.
	maxBatchAppends = 1024
)

// BatchClient appends over one AppendBatches stream, shared by all its
// callers: each Append waits for its own outcome while the appends of
// concurrent callers travel together, as many per stream message as are
// waiting when the stream is free to send. It is safe for concurrent use.
//
// One caller's appends keep their order only if it waits for each one's
// outcome before sending the next, as with concurrent unary calls.
//
// A failed stream fails the appends waiting on it — UNAVAILABLE for those
// not sent yet, OUTCOME_UNKNOWN for those sent (they may have committed; a
// retry with the same message ids is safe, the node answers it with the
// original sequences) — and the next Append opens a new stream.
type BatchClient struct {
	api  sessionv1.SessionServiceClient
	opts []grpc.CallOption
	// single carries the appends above MaxBatchBytes, one per stream
	// round trip. Not a unary Append: a unary call's failure cannot tell
	// "not sent" from "sent, answer lost" without OutcomeOptions on the
	// connection, which this client does not own.
	single *StreamClient

	mu      sync.Mutex
	cur     *batchStream  // nil: none open, or the last one failed
	opening chan struct{} // non-nil while a caller opens a stream; closed when done
	closed  bool
}

// NewBatchClient returns a BatchClient calling api; opts go to its streams
// and to the AppendStream streams of oversized requests. A stream outlives the
// callers whose appends it carries, so it does not see their contexts'
// metadata: a node's bearer token must come from the connection
// (grpc.WithPerRPCCredentials) or from opts (grpc.PerRPCCredentials).
func NewBatchClient(api sessionv1.SessionServiceClient, opts ...grpc.CallOption) *BatchClient {
	return &BatchClient{api: api, opts: opts, single: NewStreamClient(api, opts...)}
}

// Append appends req and returns its response or its error: the node's
// typed error for the request (an *errs.Error); UNAVAILABLE when it was
// not sent (nothing stored); OUTCOME_UNKNOWN when it was sent but the
// stream failed or ctx ended before the answer (it may have committed).
func (c *BatchClient) Append(ctx context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	size := sizeOf(req)
	if size > MaxBatchBytes {
		return c.single.Append(ctx, req)
	}
	bs, err := c.stream(ctx)
	if err != nil {
		return nil, err
	}
	call, err := bs.enqueue(req, size)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-call.done:
		return r.decode()
	case <-ctx.Done():
		if bs.withdraw(call) {
			return nil, errs.Unavailable("append not sent: %v", context.Cause(ctx))
		}
		select {
		case r := <-call.done: // answered as ctx ended: the answer wins
			return r.decode()
		default:
		}
		return nil, errs.OutcomeUnknown("no append answer before the deadline: %v", context.Cause(ctx))
	}
}

// Close refuses later Appends and ends the stream: appends not yet sent
// fail with UNAVAILABLE; those sent still get their outcomes (the stream
// is closed from this side once no send is under way, and the node
// answers what it received, then ends it).
func (c *BatchClient) Close() {
	c.mu.Lock()
	c.closed = true
	bs := c.cur
	c.cur = nil
	c.mu.Unlock()
	c.single.Close()
	if bs != nil {
		bs.close(errs.Unavailable("append batch client is closed"))
	}
}

// stream returns the open stream, or opens one: one caller opens while
// the others wait for it (or for their ctx to end).
func (c *BatchClient) stream(ctx context.Context) (*batchStream, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, errs.Unavailable("append batch client is closed")
		case c.cur != nil:
			bs := c.cur
			c.mu.Unlock()
			return bs, nil
		case c.opening != nil:
			wait := c.opening
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, errs.Unavailable("append not sent: %v", context.Cause(ctx))
			}
		}
		done := make(chan struct{})
		c.opening = done
		c.mu.Unlock()
		bs, err := c.open(ctx)
		c.mu.Lock()
		c.opening = nil
		if err == nil && c.closed {
			err = errs.Unavailable("append batch client is closed")
		}
		if err == nil {
			c.cur = bs
		}
		c.mu.Unlock()
		close(done)
		if err != nil {
			if bs != nil {
				bs.cancel()
			}
			return nil, err
		}
		go bs.sendOn()
		go bs.receive()
		return bs, nil
	}
}

// open opens a stream that outlives ctx; ctx bounds only the opening
// (which, with grpc.WaitForReady, waits for the connection).
func (c *BatchClient) open(ctx context.Context) (*batchStream, error) {
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	s, err := c.api.AppendBatches(sctx, c.opts...)
	if !stop() {
		cancel()
		return nil, errs.Unavailable("append stream not opened: %v", context.Cause(ctx))
	}
	if err != nil {
		cancel()
		return nil, errs.From(err)
	}
	return &batchStream{c: c, s: s, cancel: cancel, wake: make(chan struct{}, 1), stop: sctx.Done(),
		inflight: map[uint64]*batchCall{}}, nil
}

// forget drops bs as the open stream once it failed.
func (c *BatchClient) forget(bs *batchStream) {
	c.mu.Lock()
	if c.cur == bs {
		c.cur = nil
	}
	c.mu.Unlock()
}

// sizeOf is req's encoded size, or a bound on it: the exact size costs a
// walk of the message on every append, so a request whose text fields are
// well below MaxBatchBytes is counted by those alone, plus a bound on the
// tags, lengths and numbers of each field.
func sizeOf(req *sessionv1.AppendRequest) int {
	const perField = 16 // tag, length, varint: at most this much per field
	n := len(req.GetSessionId()) + 4*perField
	for _, m := range req.GetMessages() {
		n += len(m.GetMessageId()) + len(m.GetContent()) + len(m.GetMetadataJson()) + 8*perField
	}
	if n > MaxBatchBytes/4 {
		return proto.Size(req)
	}
	return n
}
