package client

import (
	"context"
	"errors"
	"io"

	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// StatusError is the error of a call on a connection made with Dial (or
// DialOptions) that the node, or gRPC, failed with a status. It is both:
//
//   - the agentstate error (Unwrap gives the *errs.Error, classified as
//     errs.From would), so errors.Is(err, errs.ErrFailedPrecondition) and
//     errors.As(err, &e) with e an *errs.Error work on what the generated
//     stubs return;
//   - the gRPC status as received (GRPCStatus), so status.Code,
//     status.FromError and the status's details are unchanged: a client
//     cancellation is still codes.Canceled there, UNAVAILABLE in errs.
type StatusError struct {
	st    *status.Status
	typed *errs.Error
}

// Error is the agentstate form: "failed precondition: <message>".
func (e *StatusError) Error() string { return e.typed.Error() }

// Unwrap returns the typed agentstate error.
func (e *StatusError) Unwrap() error { return e.typed }

// GRPCStatus returns the status the call failed with.
func (e *StatusError) GRPCStatus() *status.Status { return e.st }

// Code is the agentstate code of the failure.
func (e *StatusError) Code() errs.Code { return e.typed.Code }

// typed turns a call's error into a *StatusError when it is a gRPC status
// and not already typed. nil, io.EOF (a stream's clean end) and errors of
// the client's own making that carry no status pass unchanged, as does an
// *errs.Error (OutcomeOptions' verdict), which already matches errors.Is
// and carries its own status.
func typed(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	return &StatusError{st: st, typed: errs.From(st.Err())}
}

// TypedErrorOptions make every unary call and stream of a connection fail
// with a *StatusError (or an *errs.Error) instead of a bare status error.
// Dial and DialOptions include them, outermost but for an OwnerRouter's,
// so they see the verdict of OutcomeOptions.
func TypedErrorOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
			invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return typed(invoker(ctx, method, req, reply, cc, opts...))
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
			method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, typed(err)
			}
			return typedStream{s}, nil
		}),
	}
}

// typedStream types the errors of a stream's receives, sends and header.
type typedStream struct{ grpc.ClientStream }

func (s typedStream) RecvMsg(m any) error { return typed(s.ClientStream.RecvMsg(m)) }
func (s typedStream) SendMsg(m any) error { return typed(s.ClientStream.SendMsg(m)) }
func (s typedStream) CloseSend() error    { return typed(s.ClientStream.CloseSend()) }
