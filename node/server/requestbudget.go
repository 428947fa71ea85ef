package server

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/actors/fairshare"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/node/codec"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
)

// DefaultGRPCRequestBytes bounds what the unary gRPC requests being
// decoded and served at once may hold of the node (--grpc-request-bytes),
// each counted requestFootprint times its encoded size.
const DefaultGRPCRequestBytes = 64 << 20

// requestFootprint is how many times its encoded size a unary request
// holds while it is decoded and served: the decoded message (its strings
// are copies) and the contiguous buffer it was decoded from, which goes
// back to a pool that keeps it until the next collection. Measured with a
// heap profile of 48 concurrent 3 MiB appends (issue 15): 3 MiB of decoded
// strings and a 3 MiB buffer each, besides the 3 MiB of received frames
// that the transport holds until the decode and that no handler can
// refuse (they are bounded by --max-recv-bytes per call).
const requestFootprint = 2

// requestBudget is the room of the unary requests in flight. A request is
// charged after its bytes arrived and before it is decoded, and given back
// when its handler returns; a request that does not fit is refused
// RESOURCE_EXHAUSTED undecoded, so a flood of large requests costs the
// node their frames, not their decoding and their wait for the writer. A
// request larger than the whole budget is charged as the whole budget: it
// runs alone rather than never.
//
// The writer's backlog (--backlog-bytes) still admits each write; this
// bound comes first and holds for reads too, and for the requests the
// backlog would refuse only after decoding them.
//
// The budget is apportioned by principal (fairshare): one that holds some
// of it may take more only within its equal share among the principals
// using it, and one that holds its share has its next streams refused on
// their headers (streamTap), before their bytes are assembled.
type requestBudget struct {
	sem     *semaphore.Weighted
	cap     int64
	pending atomic.Int64 // bytes charged, for the refusal's message
	shares  *fairshare.Ledger
	// pace, when set, delays a principal's request past its share of the
	// node's work rate before it is decoded (pacing.go); refused, when
	// set, is told of the stream of each request refused for want of room.
	pace    *fairshare.Pacer
	refused func(ctx context.Context, d time.Duration)
}

func newRequestBudget(bytes int64) *requestBudget {
	if bytes <= 0 {
		bytes = DefaultGRPCRequestBytes
	}
	return &requestBudget{sem: semaphore.NewWeighted(bytes), cap: bytes, shares: fairshare.NewLedger(bytes)}
}

// overShare reports whether principal holds its share of the budget now,
// while another principal uses it too: alone, a principal's streams are
// never refused on their headers (its tails and health checks beside a
// burst of large requests), only its requests that do not fit.
func (b *requestBudget) overShare(principal string) bool {
	if principal == "" {
		return false
	}
	held, share := b.shares.Holds(principal), b.shares.Share(principal)
	return held > 0 && held >= share && share < b.cap
}

// refusal is the answer to principal's request of w bytes (0: not yet
// known, refused on its headers) that its share has no room for.
func (b *requestBudget) refusal(principal string, w int64) error {
	return errs.ResourceExhausted("principal %q holds %d bytes of requests in flight, its share of the node's %d (--grpc-request-bytes); "+
		"a request of %d more is refused: retry later", principal, b.shares.Holds(principal), b.cap, w)
}

// weight is what a request of size encoded bytes is charged.
func (b *requestBudget) weight(size int) int64 { return min(int64(size)*requestFootprint, b.cap) }

// decode receives a unary request's bytes with recv, charges them to
// principal ("": not apportioned), and decodes them into m. It returns
// the func that gives the charge back (nil when nothing was charged):
// call it once the handler returned.
func (b *requestBudget) decode(ctx context.Context, principal string, recv func(any) error, m any) (release func(), err error) {
	var u codec.Undecoded
	if err := recv(&u); err != nil {
		return nil, err
	}
	w := b.weight(u.Len())
	if !b.shares.Take(principal, w) {
		u.Free()
		b.refuse(ctx)
		return nil, b.refusal(principal, w)
	}
	if !b.sem.TryAcquire(w) {
		u.Free()
		b.shares.Give(principal, w)
		b.shares.Refused(principal)
		b.refuse(ctx)
		return nil, errs.ResourceExhausted("the node holds %d of its %d bytes of requests in flight (--grpc-request-bytes); "+
			"a request of %d bytes counts %d: retry later", b.pending.Load(), b.cap, w/requestFootprint, w)
	}
	b.pending.Add(w)
	release = func() {
		b.pending.Add(-w)
		b.sem.Release(w)
		b.shares.Give(principal, w)
	}
	if b.pace != nil {
		// Held here, its bytes counted in the budget: the principal's
		// further requests are refused on their headers once it holds
		// its share, and their connections paused.
		// Its receipt was charged already (pacing.HandleRPC): it waits
		// for the principal's earlier work, not for its own.
		cost := int64(u.Len()) + fairshare.OpCost
		if d := b.pace.DelayBefore(principal, cost); d > maxUnaryWait {
			u.Free()
			release()
			b.pauseFor(ctx, d)
			return nil, ahead(principal, d)
		}
		if err := b.pace.WaitBefore(ctx, principal, cost); err != nil {
			u.Free()
			release()
			return nil, errs.From(err)
		}
	}
	if err := u.Decode(m); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

func (b *requestBudget) refuse(ctx context.Context) { b.pauseFor(ctx, pauseAfterShareRefusal) }

func (b *requestBudget) pauseFor(ctx context.Context, d time.Duration) {
	if b.refused != nil {
		b.refused(ctx, d)
	}
}

// unaryHandler wraps a unary method's handler so that its request is
// decoded through the budget (and decodeWith's typed errors), and the
// charge is given back when the handler returns.
func (b *requestBudget) unaryHandler(h func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error)) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
		var release func()
		defer func() {
			if release != nil {
				release()
			}
		}()
		return h(srv, ctx, func(v any) error {
			var err error
			release, err = b.decode(ctx, fairshare.From(ctx), dec, v)
			return err
		}, in)
	}
}
