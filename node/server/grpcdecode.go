package server

import (
	"context"

	"github.com/agentstate/agentstate/node/codec"
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
)

// decodeErrors registers services on the API server with handlers that
// decode their requests themselves (codec.Undecoded), so that a
// request that cannot be decoded is INVALID_ARGUMENT, on every method,
// instead of the INTERNAL grpc-go would report (on a stream, to the client
// directly, whatever the handler returns). A request is decoded where a
// handler asks for it: a unary handler's dec, called before any
// interceptor runs, and a stream's RecvMsg; so both are wrapped here, at
// registration, and no service is registered without it. The API server
// forces the codec that knows Undecoded (codec.Codec).
//
// requests, when set, bounds the unary requests in flight: each is charged
// before it is decoded (requestBudget). received, when set, is told each
// message a stream receives, once decoded (the authorizer: a unary
// request reaches the interceptors decoded, a stream's only here); its
// error fails the receive, which ends the stream.
type decodeErrors struct {
	*grpc.Server
	requests *requestBudget
	received func(ctx context.Context, method string, msg any) error
}

var _ reflection.GRPCServer = decodeErrors{}

func (r decodeErrors) RegisterService(desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		h := m.Handler
		if r.requests != nil {
			m.Handler = r.requests.unaryHandler(h)
		} else {
			m.Handler = func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
				return h(srv, ctx, func(v any) error { return decodeWith(dec, v) }, in)
			}
		}
		d.Methods[i] = m
	}
	d.Streams = make([]grpc.StreamDesc, len(desc.Streams))
	for i, s := range desc.Streams {
		h := s.Handler
		method := "/" + desc.ServiceName + "/" + s.StreamName
		s.Handler = func(srv any, stream grpc.ServerStream) error {
			return h(srv, decodeErrorsStream{ServerStream: stream, method: method, received: r.received})
		}
		d.Streams[i] = s
	}
	r.Server.RegisterService(&d, impl)
}

type decodeErrorsStream struct {
	grpc.ServerStream
	method   string
	received func(ctx context.Context, method string, msg any) error
}

func (s decodeErrorsStream) RecvMsg(m any) error {
	if err := decodeWith(s.ServerStream.RecvMsg, m); err != nil || s.received == nil {
		return err
	}
	return s.received(s.Context(), s.method, m)
}

// decodeWith receives a request's bytes with recv and decodes them into m.
func decodeWith(recv func(any) error, m any) error {
	var u codec.Undecoded
	if err := recv(&u); err != nil {
		return err
	}
	return u.Decode(m)
}
