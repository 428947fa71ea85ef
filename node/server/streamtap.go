package server

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/actors/fairshare"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/tap"
)

// DefaultGRPCMaxStreamsTotal bounds the gRPC streams open at once on all
// connections together (--grpc-max-streams-total). Each may hold the
// frames of a request being received (up to --max-recv-bytes) and its
// 1 MiB receive window; without a node-wide bound that was connections ×
// streams per connection (1,024 × 256). 1,024 is over twice the largest
// concurrency the benchmarks run (C=400 unary callers; AppendBatches
// carries many appends on one stream).
const DefaultGRPCMaxStreamsTotal = 1024

// streamTap admits each gRPC stream on its headers (grpc.InTapHandle), on
// the transport's reader goroutine and before any handler goroutine is
// started or a byte of its request is read: a refused stream's DATA frames
// are discarded by the transport, so they cost the node nothing but their
// connection's flow-control accounting.
//
// Invariants: with authentication on, a stream is admitted only when its
// credential names a principal (every method, health included), which its
// context then carries (principalFrom);
// at most max streams are admitted and not yet ended. The transport calls
// the handle with its connection lock held, so it only compares, counts
// and hands work off (the audit entry is written on a goroutine of its
// own).
type streamTap struct {
	auth *authenticator // nil: no token
	m    *metrics
	max  int64
	open atomic.Int64
	// known are the served methods: a refusal is counted by method in the
	// request metrics only for these, so strangers cannot mint series.
	known map[string]bool
	full  *warnLimiter
	// shares apportions the max streams among principals (fairshare);
	// requests, when set, refuses at once a stream of a principal that
	// holds its share of the unary requests in flight, so that its
	// request's bytes are never assembled (the transport discards a
	// refused stream's frames).
	shares   *fairshare.Ledger
	requests *requestBudget
	// conns, when set, pauses the connection of a refused stream
	// (pacing.go), so that a client retrying in a loop does not spin.
	conns *connTracker
	// pace, when set, refuses the streams of a principal too far ahead of
	// its share of the work rate (maxUnaryWait), pausing their connection.
	pace *fairshare.Pacer
	// released, when set (tests), is called after each admitted stream's
	// slot is given back.
	released func()
}

func newStreamTap(auth *authenticator, max int, m *metrics, log *slog.Logger) *streamTap {
	if max <= 0 {
		max = DefaultGRPCMaxStreamsTotal
	}
	return &streamTap{auth: auth, m: m, max: int64(max), known: map[string]bool{}, shares: fairshare.NewLedger(int64(max)),
		full: newWarnLimiter(log, "refused gRPC stream: the node's streams are all in use (--grpc-max-streams-total)", warnWindow, warnBurst)}
}

// learn records the methods srv serves; call it before serving.
func (t *streamTap) learn(srv *grpc.Server) {
	for name, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			t.known["/"+name+"/"+m.Name] = true
		}
	}
}

func (t *streamTap) handle(ctx context.Context, info *tap.Info) (context.Context, error) {
	if t.auth != nil {
		p, err := t.auth.principal(ctx, info.Header)
		if err != nil {
			t.pause(ctx, pauseAfterAuthFailure)
			return nil, t.refuse(info.FullMethodName, t.auth.reject(ctx, info.FullMethodName, err))
		}
		ctx = fairshare.With(withPrincipal(ctx, p), p.Name)
		if t.pace != nil {
			if d := t.pace.Delay(p.Name); d > maxUnaryWait {
				t.m.streamsRefused.Inc()
				t.pause(ctx, d)
				return nil, t.refuse(info.FullMethodName, ahead(p.Name, d))
			}
		}
		if t.requests != nil && t.requests.overShare(p.Name) {
			t.m.streamsRefused.Inc()
			t.pause(ctx, pauseAfterShareRefusal)
			return nil, t.refuse(info.FullMethodName, t.requests.refusal(p.Name, 0))
		}
	} else {
		// No authentication (loopback only): the audit trail says so.
		ctx = principal.With(ctx, principal.Anonymous)
	}
	name := fairshare.From(ctx)
	if !t.shares.Take(name, 1) {
		t.m.streamsRefused.Inc()
		t.pause(ctx, pauseAfterShareRefusal)
		return nil, t.refuse(info.FullMethodName, errs.ResourceExhausted(
			"principal %q holds its share of %d of the node's %d gRPC streams (--grpc-max-streams-total): retry later",
			name, t.shares.Share(name), t.max))
	}
	if n := t.open.Add(1); n > t.max {
		t.open.Add(-1)
		t.shares.Give(name, 1)
		t.shares.Refused(name)
		t.m.streamsRefused.Inc()
		t.full.Warn("method", info.FullMethodName, "limit", t.max)
		return nil, t.refuse(info.FullMethodName, errs.ResourceExhausted(
			"the node serves %d gRPC streams at once (--grpc-max-streams-total): retry later", t.max))
	}
	// The transport cancels the stream's context on every end: the
	// handler's status written, a reset from the client, a deadline, the
	// connection closed, and an early abort after this handle. gRPC's
	// stats.End is not a hook for this: unknown and malformed methods end
	// without one.
	context.AfterFunc(ctx, func() {
		t.open.Add(-1)
		t.shares.Give(name, 1)
		if t.released != nil {
			t.released()
		}
	})
	return ctx, nil
}

// pause pauses the connection of the stream whose context is ctx.
func (t *streamTap) pause(ctx context.Context, d time.Duration) {
	if t.conns != nil {
		t.conns.pause(ctx, d)
	}
}

// refuse counts a refused stream in the request metrics as the
// interceptors count a served one, and returns err.
func (t *streamTap) refuse(method string, err error) error {
	if t.known[method] {
		t.m.observe(method, time.Now(), err)
	}
	return err
}

// inUse is how many admitted streams have not ended.
func (t *streamTap) inUse() int64 { return t.open.Load() }
