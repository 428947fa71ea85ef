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

// maxOutcomesPerMessage and maxOutcomeBytes bound one AppendOutcomes, so
// that a message stays far below any receive limit, and so that a stream
// whose client stopped reading holds at most about one message in the
// transport (gRPC's write quota of a stream is 64 KiB, but one message
// passes whole) once it has ended.
const (
	maxOutcomesPerMessage = 1024
	maxOutcomeBytes       = 64 << 10
)

// AppendBatches serves the stream's batches: every append is served with
// the embedded service's Append on a worker goroutine, concurrently with
// the stream's other appends, and its outcome (response or typed error) is
// sent as soon as it is decided, together with the others decided by then.
// It returns nil once the client closed its side and every append received
// was answered, or the stream's error when receiving or sending fails. When
// Draining closes, it stops taking appends (those received after are
// answered UNAVAILABLE, unserved), answers those it took, and returns
// errDraining. When one send of outcomes stays blocked for
// Limits.SendTimeout (the client does not read), it stops serving the
// stream and ends it with RESOURCE_EXHAUSTED (errStalled).
//
// Invariants: every append received is answered exactly once unless the
// stream failed; at most Limits.MaxAppends appends of the stream, carrying
// at most Limits.MaxBytes of requests, are between their receipt and the
// send (or drop) of their outcome, and there are never more workers than
// that; the handler returns only after every worker's last send (see
// outbox), except when the stream stalled: then the one send blocked since
// before may still be under way, and the transport's cancellation of the
// ended stream releases it.
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
	lim := s.Limits.withDefaults()
	// admit ends with the stream, or when its outcomes stop being read:
	// the receiver waiting for the next batch or for room in the budget
	// wakes on either.
	admit, stall := context.WithCancelCause(ctx)
	defer stall(nil)
	out := newOutbox(stream, lim, func() { stall(errStalled(lim)) })
	var serving sync.WaitGroup
	work := &workers{jobs: make(chan func()), shared: s.shared()}
	recvErr := s.receiveBatches(ctx, admit, stream, &serving, work, out)

	// Every append received has its worker, which returns once its
	// outcome is sent, dropped after a failed send, or (stalled) dropped.
	served := make(chan struct{})
	go func() {
		serving.Wait()
		close(served)
	}()
	select {
	case <-served:
	case <-admit.Done():
		if ctx.Err() == nil {
			// Stalled: a send is blocked and stays so until the stream
			// ends, which happens only once this handler returned. The
			// workers still serving finish on their own, their outcomes
			// dropped; the pool ends after the last of them.
			out.close()
			go func() {
				<-served
				close(work.jobs)
			}()
			if s.OnStall != nil {
				s.OnStall(ctx)
			}
			return context.Cause(admit)
		}
		<-served // the stream ended: its blocked sends failed
	}
	out.close()
	close(work.jobs)
	if recvErr != nil {
		return recvErr
	}
	return out.failure()
}

// receiveBatches reads batches until the client closes its side (nil),
// the stream fails, Draining closes (errDraining), or admit ends (the
// stream ended or stalled: admit's cause), handing each append to a worker
// once the stream's budget has room for it. Once Draining is seen, the
// appends of a batch received but not handed over are answered
// UNAVAILABLE, unserved.
func (s *Server) receiveBatches(ctx, admit context.Context, stream grpc.BidiStreamingServer[sessionv1.AppendBatch, sessionv1.AppendOutcomes],
	serving *sync.WaitGroup, work *workers, out *outbox) error {
	done := make(chan struct{})
	defer close(done)
	batches := receive(stream.Recv, done)
	for {
		var r received[sessionv1.AppendBatch]
		select {
		case r = <-batches:
		case <-admit.Done():
			return context.Cause(admit)
		case <-s.Draining: // nil without Draining: never
			select {
			case r = <-batches: // received already: refused below
			default:
			}
			if r.err == nil && r.msg != nil {
				return refuseAppends(admit, out, r.msg.GetAppends())
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
				return refuseAppends(admit, out, appends[i:])
			}
			tag, req := a.GetTag(), a.GetRequest()
			size := int64(req.SizeVT())
			if err := out.budget.acquire(admit, size); err != nil {
				return context.Cause(admit)
			}
			// The node's room, shared by all streams, given back once
			// the outcome is decided (Limits.TotalAppends).
			if err := work.shared.acquire(admit, size); err != nil {
				out.budget.release(1, out.budget.weight(size))
				return context.Cause(admit)
			}
			serving.Add(1)
			work.run(func() {
				defer serving.Done()
				resp, err := s.serveOne(ctx, tag, req)
				work.shared.release(size)
				if s.Observe != nil {
					s.Observe(resp, err)
				}
				out.put(&sessionv1.TaggedOutcome{Tag: tag, Outcome: outcome(resp, err)}, size)
			})
		}
	}
}

// refuseAppends answers each of appends UNAVAILABLE without serving it
// (the node is draining) and returns errDraining. Each outcome takes its
// place in the stream's budget as a served one does (the outbox gives it
// back once sent).
func refuseAppends(admit context.Context, out *outbox, appends []*sessionv1.TaggedAppend) error {
	for _, a := range appends {
		if err := out.budget.acquire(admit, 0); err != nil {
			return context.Cause(admit)
		}
		out.put(&sessionv1.TaggedOutcome{Tag: a.GetTag(), Outcome: outcome(nil, errDraining())}, 0)
	}
	return errDraining()
}

// workers runs a stream's appends on goroutines that outlive one append:
// an append descends deep (the façade, the actor call), and a fresh
// goroutine per append regrows its stack every time. A job goes to an idle
// worker if one waits, else to a new one; workers end when jobs is closed,
// once the stream's appends are all answered. There are never more
// workers than the stream's peak of appends in flight (Limits.MaxAppends).
type workers struct {
	jobs   chan func()
	shared *shared // the node's room; bounds the idle workers too (next)
}

func (w *workers) run(job func()) {
	select {
	case w.jobs <- job:
	default:
		go w.loop(job)
	}
}

func (w *workers) loop(job func()) {
	for ; job != nil; job = w.next() {
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
