package client

import (
	"context"
	"runtime"
	"sync"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// batchStream is one AppendBatches stream and the appends on it.
//
// Sending: at most one goroutine sends at a time — the one that set
// sending. A caller that finds no send under way sends the pending
// appends itself, one message (no hand-off to another goroutine when few
// callers are about); if more are pending after that, it hands the
// sending over to the stream's sending goroutine through wake, which
// sends until none are pending. Meanwhile callers only queue. The caller
// that becomes the sender yields first (settle): a Send only queues the
// message in the transport, so it ends before the next caller runs, and
// the callers one outcomes message answered (one commit's) would each
// send their next append alone — node bench W2 sent 16,195 messages for
// 16,384 appends; with settle, about 4,000.
//
// Invariants: an append is in pending until a sender takes it, then in
// inflight under its tag until its outcome arrives or the stream fails;
// done receives exactly one result per call that was enqueued and not
// withdrawn; once err is set nothing is enqueued; sending is cleared only
// under mu by take finding nothing pending, so no append is left pending
// without a sender.
type batchStream struct {
	c      *BatchClient
	s      grpc.BidiStreamingClient[sessionv1.AppendBatch, sessionv1.AppendOutcomes]
	cancel context.CancelFunc
	wake   chan struct{} // capacity 1: sending handed to sendOn
	stop   <-chan struct{}

	mu       sync.Mutex
	pending  []*batchCall
	inflight map[uint64]*batchCall
	nextTag  uint64
	sending  bool
	closing  bool // Close came during a send: the sender closes the sending side
	err      error
}

type batchCall struct {
	tag  uint64
	req  *sessionv1.AppendRequest
	size int
	done chan batchResult // capacity 1
}

type batchResult struct {
	out *sessionv1.AppendStreamResponse
	err error
}

func (r batchResult) decode() (*sessionv1.AppendResponse, error) {
	if r.err != nil {
		return nil, r.err
	}
	return decode(r.out)
}

func (bs *batchStream) enqueue(req *sessionv1.AppendRequest, size int) (*batchCall, error) {
	bs.mu.Lock()
	if bs.err != nil {
		err := bs.err
		bs.mu.Unlock()
		return nil, err
	}
	bs.nextTag++
	call := &batchCall{tag: bs.nextTag, req: req, size: size, done: make(chan batchResult, 1)}
	bs.pending = append(bs.pending, call)
	send := !bs.sending
	bs.sending = true
	bs.mu.Unlock()
	if send {
		// Let the callers already runnable (answered by the same
		// outcomes message) queue theirs first, to share this message.
		bs.settle()
		bs.sendOnce()
	}
	return call, nil
}

// maxSettleYields bounds the yields of settle.
const maxSettleYields = 8

// settle is the new sender's wait for the callers already runnable: it
// yields until a yield brings no more appends, at most maxSettleYields
// times (a yield costs well under a microsecond; a message on the wire,
// tens, both ways). The callers one outcomes message wakes do not all run
// in one yield (node bench W1: about 2,200 messages for 16,384 appends
// after one yield, about 1,800 with settle).
func (bs *batchStream) settle() {
	n := bs.queued()
	for range maxSettleYields {
		runtime.Gosched()
		m := bs.queued()
		if m == n {
			return
		}
		n = m
	}
}

func (bs *batchStream) queued() int {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return len(bs.pending)
}

// sendOnce sends one message of pending appends for the caller that
// became the sender, then stops sending or hands it to sendOn.
func (bs *batchStream) sendOnce() {
	batch := bs.take()
	if batch == nil {
		return
	}
	if err := bs.s.Send(batch); err != nil {
		bs.sendFailed()
		return
	}
	if bs.more() {
		select {
		case bs.wake <- struct{}{}:
		case <-bs.stop: // failed meanwhile: fail answers what is pending
		}
	}
}

// more reports whether appends are pending, clearing sending if none are.
func (bs *batchStream) more() bool {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if len(bs.pending) == 0 || bs.err != nil {
		bs.stopSending()
		return false
	}
	return true
}

// stopSending clears sending, the sender's last act; if Close came while
// it was sending, it closes the sending side now that no send can race
// it. Called with mu held by the sender.
func (bs *batchStream) stopSending() {
	bs.sending = false
	if bs.closing {
		bs.closing = false
		_ = bs.s.CloseSend()
	}
}

// sendFailed ends a stream whose Send failed. The stream's real status
// comes from Recv (Send's error, io.EOF, says only that it ended), which
// the cancellation ends; sending stays set, so nothing more is sent.
func (bs *batchStream) sendFailed() { bs.cancel() }

// withdraw takes call back if it was not sent yet; false once it was.
func (bs *batchStream) withdraw(call *batchCall) bool {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for i, p := range bs.pending {
		if p == call {
			bs.pending = append(bs.pending[:i], bs.pending[i+1:]...)
			return true
		}
	}
	// Sent: its outcome, when it comes, goes to the buffered done and is
	// dropped with call.
	delete(bs.inflight, call.tag)
	return false
}

// sendOn is the stream's sending goroutine: handed the sending through
// wake, it sends until no appends are pending.
func (bs *batchStream) sendOn() {
	for {
		select {
		case <-bs.wake:
		case <-bs.stop:
			return
		}
		for {
			batch := bs.take()
			if batch == nil {
				break
			}
			if err := bs.s.Send(batch); err != nil {
				bs.sendFailed()
				return
			}
		}
	}
}

// take moves the oldest pending appends, within the bounds of one
// message, to inflight and returns them as a batch; nil, with sending
// cleared, when none wait.
func (bs *batchStream) take() *sessionv1.AppendBatch {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if len(bs.pending) == 0 || bs.err != nil {
		bs.stopSending()
		return nil
	}
	batch := &sessionv1.AppendBatch{}
	n, bytes := 0, 0
	for n < len(bs.pending) && n < maxBatchAppends && (n == 0 || bytes+bs.pending[n].size <= MaxBatchBytes) {
		call := bs.pending[n]
		bytes += call.size
		batch.Appends = append(batch.Appends, &sessionv1.TaggedAppend{Tag: call.tag, Request: call.req})
		bs.inflight[call.tag] = call
		n++
	}
	rest := copy(bs.pending, bs.pending[n:])
	clear(bs.pending[rest:])
	bs.pending = bs.pending[:rest]
	return batch
}

// receive delivers outcomes to their calls until the stream fails.
func (bs *batchStream) receive() {
	for {
		msg, err := bs.s.Recv()
		if err != nil {
			bs.fail(err)
			return
		}
		for _, o := range msg.GetOutcomes() {
			bs.mu.Lock()
			call := bs.inflight[o.GetTag()]
			delete(bs.inflight, o.GetTag())
			bs.mu.Unlock()
			if call != nil {
				call.done <- batchResult{out: o.GetOutcome()}
			}
		}
	}
}

// close stops the stream taking appends, fails those not sent, and
// closes the sending side — now if no send is under way (none can start
// once err is set), else by the sender when its send ends — so the node
// answers the appends in flight and then ends the stream.
func (bs *batchStream) close(err error) {
	bs.mu.Lock()
	if bs.err == nil {
		bs.err = err
	}
	calls := bs.pending
	bs.pending = nil
	if bs.sending {
		bs.closing = true
	} else {
		_ = bs.s.CloseSend()
	}
	bs.mu.Unlock()
	for _, call := range calls {
		call.done <- batchResult{err: err}
	}
}

// fail ends the stream after cause: the appends not sent get UNAVAILABLE,
// those sent OUTCOME_UNKNOWN, and the client opens a new stream for the
// next Append. A stream the node refused as a whole (no or wrong token, a
// node without AppendBatches) served nothing: every append gets that
// refusal, which retrying does not cure, instead of an invitation to retry.
func (bs *batchStream) fail(cause error) {
	var notSent, unknown error = errs.Unavailable("append not sent: append stream ended: %v", cause),
		errs.OutcomeUnknown("append stream ended before the answer: %v", cause)
	switch status.Code(cause) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.Unimplemented:
		notSent, unknown = cause, cause
	}
	bs.mu.Lock()
	if bs.err == nil {
		bs.err = notSent
	}
	pending, inflight := bs.pending, bs.inflight
	bs.pending, bs.inflight = nil, nil
	bs.mu.Unlock()
	bs.c.forget(bs)
	// Cancelling resets the stream if it still runs; CloseSend could race
	// a send under way.
	bs.cancel()
	for _, call := range pending {
		call.done <- batchResult{err: notSent}
	}
	for _, call := range inflight {
		call.done <- batchResult{err: unknown}
	}
}
