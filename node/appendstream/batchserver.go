package appendstream

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc"
)

const (
	// MaxStreamInFlight bounds the appends one AppendBatches stream has
	// being served at once. Past it the server stops reading the stream,
	// so HTTP/2 flow control holds the client back instead of the node
	// starting ever more appends for one peer.
	MaxStreamInFlight = 8192
	// maxOutcomesPerMessage bounds how many outcomes one AppendOutcomes
	// carries, so that a message stays far below any receive limit.
	maxOutcomesPerMessage = 1024
)

// AppendBatches serves the stream's batches: every append is served with
// the embedded service's Append on a worker goroutine, concurrently with
// the stream's other appends, and its outcome (response or typed error) is
// sent as soon as it is decided, together with the others decided by then.
// It returns nil once the client closed its side and every append received
// was answered, or the stream's error when receiving or sending fails. When
// Draining closes, it stops taking appends (those received after are
// answered UNAVAILABLE, unserved), answers those it took, and returns
// errDraining.
//
// Invariants: every append received is answered exactly once unless the
// stream failed; at most MaxStreamInFlight appends of the stream are
// between their receipt and the send of their outcome; the handler returns
// only after every worker's last send (see outbox).
func (s *Server) AppendBatches(stream grpc.BidiStreamingServer[sessionv1.AppendBatch, sessionv1.AppendOutcomes]) error {
	ctx := stream.Context()
	if s.Mark != nil {
		ctx = s.Mark(ctx)
	}
	// Headers go out at once: they tell a client that the stream reached
	// this handler, so an append it sends only after them and whose answer
	// is then lost may have been applied (OUTCOME_UNKNOWN), while one held
	// back until a failure came first was never sent (UNAVAILABLE). Clients
	// that cannot see when their transport sent a message (Python's grpcio)
	// draw that line here.
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	out := &outbox{stream: stream, slots: make(chan struct{}, MaxStreamInFlight)}
	var serving sync.WaitGroup
	work := &workers{jobs: make(chan func())}
	recvErr := s.receiveBatches(ctx, stream, &serving, work, out)
	// Every append received has its worker, which returns only once its
	// outcome is sent (or dropped after a failed send).
	serving.Wait()
	close(work.jobs)
	if recvErr != nil {
		return recvErr
	}
	return out.failure()
}

// receiveBatches reads batches until the client closes its side (nil),
// the stream fails, or Draining closes (errDraining), handing each append
// to a worker. Once Draining is seen, the appends of a batch received but
// not handed over are answered UNAVAILABLE, unserved.
func (s *Server) receiveBatches(ctx context.Context, stream grpc.BidiStreamingServer[sessionv1.AppendBatch, sessionv1.AppendOutcomes],
	serving *sync.WaitGroup, work *workers, out *outbox) error {
	done := make(chan struct{})
	defer close(done)
	batches := receive(stream.Recv, done)
	for {
		var r received[sessionv1.AppendBatch]
		select {
		case r = <-batches:
		case <-s.Draining: // nil without Draining: never
			select {
			case r = <-batches: // received already: refused below
			default:
			}
			if r.err == nil && r.msg != nil {
				return refuseAppends(ctx, out, r.msg.GetAppends())
			}
			return errDraining()
		}
		if errors.Is(r.err, io.EOF) {
			return nil
		}
		if r.err != nil {
			return r.err
		}
		appends := r.msg.GetAppends()
		for i, a := range appends {
			if s.draining() {
				return refuseAppends(ctx, out, appends[i:])
			}
			select {
			case out.slots <- struct{}{}:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			serving.Add(1)
			tag, req := a.GetTag(), a.GetRequest()
			work.run(func() {
				defer serving.Done()
				resp, err := s.serveOne(ctx, tag, req)
				if s.Observe != nil {
					s.Observe(resp, err)
				}
				out.put(&sessionv1.TaggedOutcome{Tag: tag, Outcome: outcome(resp, err)})
			})
		}
	}
}

// refuseAppends answers each of appends UNAVAILABLE without serving it
// (the node is draining) and returns errDraining. Each outcome takes a
// stream slot as a served one does (the outbox frees it once sent).
func refuseAppends(ctx context.Context, out *outbox, appends []*sessionv1.TaggedAppend) error {
	for _, a := range appends {
		select {
		case out.slots <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		out.put(&sessionv1.TaggedOutcome{Tag: a.GetTag(), Outcome: outcome(nil, errDraining())})
	}
	return errDraining()
}

// workers runs a stream's appends on goroutines that outlive one append:
// an append descends deep (the façade, the actor call), and a fresh
// goroutine per append regrows its stack every time. A job goes to an idle
// worker if one waits, else to a new one; workers end when jobs is closed,
// once the stream's appends are all answered. There are never more
// workers than the stream's peak of appends in flight (MaxStreamInFlight).
type workers struct{ jobs chan func() }

func (w *workers) run(job func()) {
	select {
	case w.jobs <- job:
	default:
		go w.loop(job)
	}
}

func (w *workers) loop(job func()) {
	for ; job != nil; job = <-w.jobs {
		job()
	}
}

// serveOne serves one append of a batch. It runs on a goroutine of its
// own, outside the stream handler's recovery, so a panic of the service
// becomes this append's INTERNAL error instead of ending the process.
func (s *Server) serveOne(ctx context.Context, tag uint64, req *sessionv1.AppendRequest) (resp *sessionv1.AppendResponse, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, errs.Internal("append %d of the batch failed: %v", tag, p)
		}
	}()
	if req == nil {
		return nil, errs.InvalidArgument("append %d of the batch has no request", tag)
	}
	return s.Append(ctx, req)
}

// outbox sends a stream's outcomes. The worker that puts an outcome while
// no send is under way becomes the sender: it sends every outcome put by
// then in one message, and goes on until none wait; the others only queue
// theirs. So a lone outcome costs no hand-off to another goroutine, and
// under load one message carries many. The stream's slot of an outcome is
// freed once the outcome was sent: a client that stops reading holds the
// stream at MaxStreamInFlight appends.
//
// Invariants: at most one goroutine (the one that set sending) calls
// stream.Send; sending is cleared, under mu, only when nothing is pending;
// after a failed send outcomes are dropped, not sent.
type outbox struct {
	stream grpc.BidiStreamingServer[sessionv1.AppendBatch, sessionv1.AppendOutcomes]
	slots  chan struct{}

	mu      sync.Mutex
	pending []*sessionv1.TaggedOutcome
	sending bool
	err     error
}

func (o *outbox) put(oc *sessionv1.TaggedOutcome) {
	o.mu.Lock()
	o.pending = append(o.pending, oc)
	if o.sending {
		o.mu.Unlock()
		return
	}
	o.sending = true
	// The appends of one commit are answered together: yield once, so the
	// workers woken by the same commit queue their outcomes before this one
	// sends, and one message carries them all. A client that pays per
	// message received (Python's grpcio: 30-45 µs each) then pays a fifth
	// as often; a lone outcome waits only for the goroutines already
	// runnable.
	o.mu.Unlock()
	runtime.Gosched()
	o.mu.Lock()
	for len(o.pending) > 0 {
		n := min(len(o.pending), maxOutcomesPerMessage)
		msg := &sessionv1.AppendOutcomes{Outcomes: o.pending[:n:n]}
		o.pending = o.pending[n:]
		failed := o.err != nil
		o.mu.Unlock()
		var err error
		if !failed {
			err = o.stream.Send(msg)
		}
		for range n {
			<-o.slots
		}
		o.mu.Lock()
		if err != nil {
			o.err = err
		}
	}
	o.pending = nil
	o.sending = false
	o.mu.Unlock()
}

// failure is the first failed send, once every worker has returned.
func (o *outbox) failure() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
