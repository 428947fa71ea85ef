// Package appendstream serves and calls the AppendStream rpc of the
// sessions API: many appends on one gRPC stream, one response per request,
// in order.
//
// A unary Append pays for a new HTTP/2 stream, headers and trailers, a
// handler goroutine and the interceptor chain on every call; on a stream
// an append costs one message each way. The server side, Server, serves
// each request with the wrapped service's Append (the same façade as the
// unary rpc: validation, backlog admission, the session actor, the group
// commit) and sends its outcome, an error included, without ending the
// stream:
//
//	sessionv1.RegisterSessionServiceServer(srv, &appendstream.Server{
//		SessionServiceServer: node.Sessions(), Mark: audit.NoWait})
//
// The client side, Client, keeps a free list of open streams, so that
// concurrent callers each use one stream at a time and a stream is reused
// for the caller's next append:
//
//	c := appendstream.NewClient(sessionv1.NewSessionServiceClient(conn))
//	defer c.Close()
//	resp, err := c.Append(ctx, req) // err is the request's typed error
//
// A request's failure comes back as the error of its AppendStreamResponse
// and Client returns it as an *errs.Error with its code, as a unary call's
// status would be; a broken stream fails the requests on it with
// UNAVAILABLE, and a retry with the same message ids is safe.
package appendstream
