package server

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The API's interceptor chains, outermost first:
//
//	observe  -> metrics by method and final code (panics
//	            included); at debug level, one log line per request
//	recover  -> a panic in a handler becomes INTERNAL, the process lives on
//	admit    -> marks the request as a network sender's (no waiting on a full
//	            backlog) and gives every error a gRPC status
//
// The bearer token is checked before these, on the stream's headers
// (streamTap): a call without it never reaches an interceptor, and is
// counted in the request metrics there.
func unaryChain(m *metrics, markNetwork func(context.Context) context.Context, log *slog.Logger) []grpc.UnaryServerInterceptor {
	return []grpc.UnaryServerInterceptor{observeUnary(m, log), recoverUnary(m, log), admitUnary(markNetwork)}
}

func streamChain(m *metrics, log *slog.Logger) []grpc.StreamServerInterceptor {
	return []grpc.StreamServerInterceptor{observeStream(m, log), recoverStream(m, "api", log)}
}

func observeUnary(m *metrics, log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		m.observe(info.FullMethod, start, err)
		if ar, ok := resp.(*sessionv1.AppendResponse); ok {
			m.countAppend(ar, err)
		}
		if log.Enabled(ctx, slog.LevelDebug) {
			logRequest(ctx, log, info.FullMethod, req, start, err)
		}
		return resp, err
	}
}

func observeStream(m *metrics, log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		err := handler(srv, ss)
		m.observe(info.FullMethod, start, err)
		if log.Enabled(ss.Context(), slog.LevelDebug) {
			logRequest(ss.Context(), log, info.FullMethod, nil, start, err)
		}
		return err
	}
}

// logRequest writes the debug line of one request (a stream: once, when it
// ends): method, the ids the request names, the final code, its error's
// message and the duration. Contents are never logged.
func logRequest(ctx context.Context, log *slog.Logger, method string, req any, start time.Time, err error) {
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("method", method))
	if r, ok := req.(interface{ GetSessionId() string }); ok && r.GetSessionId() != "" {
		attrs = append(attrs, slog.String("session_id", r.GetSessionId()))
	}
	if r, ok := req.(interface{ GetPlanId() string }); ok && r.GetPlanId() != "" {
		attrs = append(attrs, slog.String("plan_id", r.GetPlanId()))
	}
	if r, ok := req.(interface{ GetEventId() string }); ok && r.GetEventId() != "" {
		attrs = append(attrs, slog.String("event_id", r.GetEventId()))
	}
	if r, ok := req.(interface{ GetRecordId() string }); ok && r.GetRecordId() != "" {
		attrs = append(attrs, slog.String("record_id", r.GetRecordId()))
	}
	if r, ok := req.(*sessionv1.AppendRequest); ok {
		var mids []string
		for _, msg := range r.GetMessages() {
			if id := msg.GetMessageId(); id != "" {
				mids = append(mids, id)
			}
		}
		if len(mids) > 0 {
			attrs = append(attrs, slog.Any("message_ids", mids))
		}
	}
	st, _ := status.FromError(toStatus(err))
	attrs = append(attrs, slog.String("code", st.Code().String()))
	if err != nil {
		attrs = append(attrs, slog.String("error", st.Message()))
	}
	attrs = append(attrs, slog.Duration("duration", time.Since(start)))
	log.LogAttrs(ctx, slog.LevelDebug, "request", attrs...)
}

func (m *metrics) observe(method string, start time.Time, err error) {
	code := status.Code(err)
	m.requests.WithLabelValues(method, code.String()).Inc()
	m.latency.WithLabelValues(method).Observe(time.Since(start).Seconds())
	if code != codes.OK {
		m.errors.WithLabelValues(code.String()).Inc()
	}
}

// recovered turns a recovered panic value into the INTERNAL error the
// caller sees, logging the stack (the caller gets no internals).
func recovered(m *metrics, server, method string, r any, log *slog.Logger) error {
	m.recoveredPanics.WithLabelValues(server).Inc()
	log.Error("recovered panic in request handler", "server", server, "method", method,
		"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	return status.Errorf(codes.Internal, "internal error while serving %s; the node logged the details", method)
}

func recoverUnary(m *metrics, log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				resp, err = nil, recovered(m, "api", info.FullMethod, r, log)
			}
		}()
		return handler(ctx, req)
	}
}

func recoverStream(m *metrics, server string, log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = recovered(m, server, info.FullMethod, r, log)
			}
		}()
		return handler(srv, ss)
	}
}

// admitUnary marks the request as coming from a network sender and makes
// sure every error leaves as a gRPC status with the right code: services
// return *errs.Error (which carries its status), anything else is
// classified by errs.From.
func admitUnary(markNetwork func(context.Context) context.Context) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if markNetwork != nil {
			ctx = markNetwork(ctx)
		}
		resp, err := handler(ctx, req)
		if err != nil {
			return nil, toStatus(err)
		}
		return resp, nil
	}
}

func toStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return errs.From(err)
}
