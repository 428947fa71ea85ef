package appendstream

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/agentstate/agentstate/messages/errs"
	sessionv1 "github.com/agentstate/agentstate/messages/session/v1"
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
// the embedded service's Append on a goroutine of its own, concurrently with
// the stream's other appends, and its outcome (response or typed error) is
// sent as soon as it is decided, together with the others decided by then.
// It returns nil once the client closed its side and every append received
// was answered, or the stream's error when receiving or sending fails.
//
// Invariants: only the sending goroutine calls stream.Send; every append
// received is answered exactly once unless the stream failed; at most
// MaxStreamInFlight appends of the stream are being served at a time.
func (s *Server) AppendBatches(stream grpc.BidiStreamingServer[sessionv1.AppendBatch, sessionv1.AppendOutcomes]) error {
	ctx := stream.Context()
	if s.Mark != nil {
		ctx = s.Mark(ctx)
	}
	outcomes := make(chan *sessionv1.TaggedOutcome, maxOutcomesPerMessage)
	slots := make(chan struct{}, MaxStreamInFlight)
	var serving sync.WaitGroup
	sent := make(chan error, 1)
	go func() { sent <- sendOutcomes(stream, outcomes) }()

	work := &workers{jobs: make(chan func())}
	recvErr := s.receiveBatches(ctx, stream, slots, &serving, work, outcomes)
	// Every append received has its worker: once they have all put their
	// outcome, the sender drains the channel and stops.
	serving.Wait()
	close(work.jobs)
	close(outcomes)
	sendErr := <-sent
	if recvErr != nil {
		return recvErr
	}
	return sendErr
}

// receiveBatches reads batches until the client closes its side (nil) or
// the stream fails, starting one goroutine per append.
func (s *Server) receiveBatches(ctx context.Context, stream grpc.BidiStreamingServer[sessionv1.AppendBatch, sessionv1.AppendOutcomes],
	slots chan struct{}, serving *sync.WaitGroup, work *workers, outcomes chan<- *sessionv1.TaggedOutcome) error {
	for {
		batch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, a := range batch.GetAppends() {
			select {
			case slots <- struct{}{}:
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
				// The slot is freed only once the outcome is queued: a
				// client that stops reading holds the stream's appends
				// at MaxStreamInFlight.
				outcomes <- &sessionv1.TaggedOutcome{Tag: tag, Outcome: outcome(resp, err)}
				<-slots
			})
		}
	}
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

// sendOutcomes sends what arrives on outcomes, everything ready at once in
// one message, until outcomes is closed. After a send failed it keeps
// draining (the appends still finish) and returns that failure.
func sendOutcomes(stream grpc.BidiStreamingServer[sessionv1.AppendBatch, sessionv1.AppendOutcomes], outcomes <-chan *sessionv1.TaggedOutcome) error {
	var failed error
	for first := range outcomes {
		msg := &sessionv1.AppendOutcomes{Outcomes: []*sessionv1.TaggedOutcome{first}}
	gather:
		for len(msg.Outcomes) < maxOutcomesPerMessage {
			select {
			case o, ok := <-outcomes:
				if !ok {
					break gather
				}
				msg.Outcomes = append(msg.Outcomes, o)
			default:
				break gather
			}
		}
		if failed == nil {
			failed = stream.Send(msg)
		}
	}
	return failed
}
