package client

import (
	"context"
	"sync/atomic"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// OutcomeOptions are the dial options that make a connection's unary
// calls tell the truth about a failure: UNAVAILABLE only when nothing of
// the request can have reached the node, OUTCOME_UNKNOWN when a write was
// sent and its answer lost. Dial every connection that writes with them
// (the CLI and the crash checker do):
//
//	conn, err := grpc.NewClient(addr, append(appendstream.OutcomeOptions(), creds)...)
//
// grpc-go reports codes.Unavailable both for a call that never left the
// client (no connection, a connection that failed before the stream was
// opened) and for a connection that broke after the request was sent — the
// latter is exactly the write a kill -9 interrupts after its commit, and
// retrying it as "nothing stored" stores it twice. The rule, per call:
//
//   - A status the node sent (received in the stream's trailers) is the
//     node's answer and is kept: the node answers UNAVAILABLE only for what
//     it refused before the writer.
//   - Any other failure (made by the client: connection lost, reset,
//     deadline, cancellation) of a call whose stream was placed on a
//     transport — its headers handed to the connection, and the request
//     after them — may have been applied: OUTCOME_UNKNOWN (gRPC
//     DEADLINE_EXCEEDED), for every method that writes.
//   - One whose stream never reached a transport sent nothing:
//     UNAVAILABLE. gRPC's transparent retry counts here: grpc-go retries an
//     attempt on its own only when the server cannot have processed it
//     (refused with REFUSED_STREAM, above a GOAWAY's last stream id, or
//     never written), and marks the new attempt as such; an attempt retried
//     for any other reason (a service-config retry policy) keeps the call
//     "sent".
//
// Reads keep their codes: a read applies nothing, so UNAVAILABLE is true of
// it. Streaming calls are not covered here: Client and BatchClient know
// which appends they sent.
func OutcomeOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithStatsHandler(sentTracker{}),
		grpc.WithChainUnaryInterceptor(truthfulUnary),
	}
}

// callSent is what sentTracker learned about one call's attempts.
type callSent struct {
	sent     atomic.Bool // the current attempt's stream reached a transport
	answered atomic.Bool // the node's status arrived (trailers)
}

type callSentKey struct{}

// sentTracker is the stats handler behind OutcomeOptions: it marks the
// callSent that truthfulUnary put in the call's context.
type sentTracker struct{}

func (sentTracker) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (sentTracker) HandleRPC(ctx context.Context, s stats.RPCStats) {
	cs, _ := ctx.Value(callSentKey{}).(*callSent)
	if cs == nil {
		return
	}
	switch s := s.(type) {
	case *stats.Begin:
		// A transparent retry follows only an attempt the server never
		// processed, so that attempt's stream no longer counts.
		if s.IsTransparentRetryAttempt {
			cs.sent.Store(false)
		}
	case *stats.OutHeader:
		// Emitted once the stream's headers are queued on a transport:
		// from here on the request may reach the node.
		cs.sent.Store(true)
	case *stats.InTrailer:
		cs.answered.Store(true)
	}
}

func (sentTracker) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (sentTracker) HandleConn(context.Context, stats.ConnStats)                       {}

// truthfulUnary rewrites a failed write's client-made status by the rule
// of OutcomeOptions.
func truthfulUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	cs := &callSent{}
	err := invoker(context.WithValue(ctx, callSentKey{}, cs), method, req, reply, cc, opts...)
	if err == nil || cs.answered.Load() || readOnly[method] {
		return err
	}
	return outcomeOf(err, cs.sent.Load())
}

// outcomeOf is the truthful error for a call that failed with err, made
// by the client, when the request was sent (or not).
func outcomeOf(err error, sent bool) error {
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded:
	default:
		return err // a client-side refusal (too large, bad credentials): nothing sent
	}
	msg := status.Convert(err).Message()
	if sent {
		return errs.OutcomeUnknown("the request was sent and its answer lost (%s: %s); it may have been applied", status.Code(err), msg)
	}
	return errs.Unavailable("the request was not sent (%s: %s); nothing was applied", status.Code(err), msg)
}

// readOnly are the unary methods that change nothing.
var readOnly = map[string]bool{
	sessionv1.SessionService_Get_FullMethodName:          true,
	sessionv1.SessionService_List_FullMethodName:         true,
	sessionv1.SessionService_ListMessages_FullMethodName: true,
	sessionv1.SessionService_GetItem_FullMethodName:      true,
	sessionv1.SessionService_ListItems_FullMethodName:    true,
	sessionv1.SessionService_Export_FullMethodName:       true,
	planv1.PlanService_History_FullMethodName:            true,
	planv1.PlanService_ErrorDetails_FullMethodName:       true,
	auditv1.AuditService_List_FullMethodName:             true,
	auditv1.AuditService_Count_FullMethodName:            true,
	auditv1.AuditService_Get_FullMethodName:              true,
	auditv1.AuditService_Verify_FullMethodName:           true,
	auditv1.AuditService_Flush_FullMethodName:            true,
}
