package appendstream

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/agentstate/agentstate/actors/fairshare"
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

// AppendBatches serves the stream's batches: every append is handed to
// the embedded service as it is read — with AppendAsync when the service
// has it (session.Service), so no goroutine waits per append, else with
// Append on a worker goroutine — and its outcome (response or typed error)
// goes to the stream's outbox, whose sender sends the outcomes decided
// together (those of one commit) in one message. It returns nil once the
// client closed its side and every append received was answered, or the
// stream's error when receiving or sending fails. When Draining closes, it
// stops taking appends (those received after are answered UNAVAILABLE,
// unserved), answers those it took, and returns errDraining. When one send
// of outcomes stays blocked for Limits.SendTimeout (the client does not
// read), it stops serving the stream and ends it with RESOURCE_EXHAUSTED
// (errStalled).
//
// Invariants: every append received is answered exactly once unless the
// stream failed; at most Limits.MaxAppends appends of the stream, carrying
// at most Limits.MaxBytes of requests, are between their receipt and the
// send (or drop) of their outcome, and there are never more workers than
// that; the handler returns only after the outbox's sender made its last
// send, except when the stream stalled: then the one send blocked since
// before may still be under way, and the transport's cancellation of the
// ended stream releases it. Appends still undecided when the stream ends
// are decided anyway (they were handed over); their outcomes are dropped.
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
	// serving counts the appends received whose outcome was not yet sent
	// or dropped (the outbox counts them out).
	var serving sync.WaitGroup
	out := newOutbox(stream, lim, &serving, func() { stall(errStalled(lim)) })
	go out.run()
	work := &workers{jobs: make(chan func()), shared: s.shared()}
	recvErr := s.receiveBatches(ctx, admit, stream, &serving, work, out)

	served := make(chan struct{})
	go func() {
		serving.Wait()
		close(served)
	}()
	select {
	case <-served:
		out.close()
		<-out.exited
		close(work.jobs)
		if recvErr != nil {
			return recvErr
		}
		return out.failure()
	case <-admit.Done():
	}
	// The stream ended, or stalled. The appends not yet decided are
	// decided anyway, their outcomes dropped; workers still serving end
	// the pool after the last of them.
	out.close()
	go func() {
		<-served
		close(work.jobs)
	}()
	if ctx.Err() != nil {
		<-out.exited // a send under way failed with the stream
		return recvErr
	}
	// Stalled: a send is blocked and stays so until the stream ends,
	// which happens only once this handler returned.
	if s.OnStall != nil {
		s.OnStall(ctx)
	}
	return context.Cause(admit)
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
	principal := fairshare.From(ctx)
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
			if err := work.shared.acquire(admit, principal, size); err != nil {
				out.budget.release(1, out.budget.weight(size))
				return context.Cause(admit)
			}
			serving.Add(1)
			ans := &answer{s: s, out: out, tag: tag, size: size, shared: work.shared, principal: principal}
			if async, ok := s.SessionServiceServer.(asyncAppender); ok && req != nil {
				s.serveAsync(ctx, async, req, ans)
				continue
			}
			work.run(func() { ans.done(s.serveOne(ctx, tag, req)) })
		}
	}
}

// asyncAppender serves an append without a goroutine waiting for it
// (session.Service.AppendAsync): done is called once, on the goroutine
// that decides the outcome, and must not block.
type asyncAppender interface {
	AppendAsync(ctx context.Context, req *sessionv1.AppendRequest, done func(*sessionv1.AppendResponse, error))
}

// answer takes one append's outcome to the outbox, once.
type answer struct {
	s      *Server
	out    *outbox
	tag    uint64
	size   int64
	shared *shared // the node's room, given back once the outcome is decided
	// principal is the stream's (fairshare.From), whose share of the
	// node's room the append holds.
	principal string
	answered  atomic.Bool
}

func (a *answer) done(resp *sessionv1.AppendResponse, err error) {
	if !a.answered.CompareAndSwap(false, true) {
		return
	}
	a.shared.release(a.principal, a.size)
	if a.s.Observe != nil {
		a.s.Observe(resp, err)
	}
	a.out.put(&sessionv1.TaggedOutcome{Tag: a.tag, Outcome: outcome(resp, err)}, a.size)
}

// serveAsync hands one append of a batch to the service, on the stream's
// receiving goroutine (validation and admission run here; a network
// sender's admission refuses instead of waiting). A panic of the service
// becomes the append's INTERNAL error instead of ending the process.
func (s *Server) serveAsync(ctx context.Context, async asyncAppender, req *sessionv1.AppendRequest, ans *answer) {
	defer func() {
		if p := recover(); p != nil {
			ans.done(nil, errs.Internal("append %d of the batch failed: %v", ans.tag, p))
		}
	}()
	async.AppendAsync(ctx, req, ans.done)
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
		out.serving.Add(1)
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

// serveOne serves one append of a batch with a service that has no
// AppendAsync. It runs on a worker goroutine, the stream handler's recovery, so a panic of the service
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
