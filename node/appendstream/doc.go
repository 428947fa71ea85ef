// Package appendstream serves the streaming appends of the sessions API:
// AppendStream (many appends on one gRPC stream, one response per
// request, in order) and AppendBatches (the appends of many concurrent
// callers sharing one stream, served concurrently, each answered under its
// tag). The Go clients of both are in package client (node/client).
//
// A unary Append pays for a new HTTP/2 stream, headers and trailers, a
// handler goroutine and the interceptor chain on every call; on a stream
// an append costs one message each way; in a batch, a share of one
// message each way. Server serves each request with the wrapped service's
// Append (the same façade as the unary rpc: validation, backlog
// admission, the session actor, the group commit) and sends its outcome,
// an error included, without ending the stream:
//
//	sessionv1.RegisterSessionServiceServer(srv, &appendstream.Server{
//		SessionServiceServer: node.Sessions(), Mark: writer.NoWait})
//
// The server that registers it forces package codec's codec
// (grpc.ForceServerCodecV2(codec.Codec())), which decodes AppendBatch
// with the generated code.
package appendstream
