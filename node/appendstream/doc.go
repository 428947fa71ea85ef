// Package appendstream serves and calls the streaming appends of the
// sessions API: AppendStream (many appends on one gRPC stream, one
// response per request, in order) and AppendBatches (the appends of many
// concurrent callers sharing one stream, served concurrently, each
// answered under its tag).
//
// A unary Append pays for a new HTTP/2 stream, headers and trailers, a
// handler goroutine and the interceptor chain on every call; on a stream
// an append costs one message each way; in a batch, a share of one
// message each way. The server side, Server, serves each request with the
// wrapped service's Append (the same façade as the unary rpc: validation,
// backlog admission, the session actor, the group commit) and sends its
// outcome, an error included, without ending the stream:
//
//	sessionv1.RegisterSessionServiceServer(srv, &appendstream.Server{
//		SessionServiceServer: node.Sessions(), Mark: writer.NoWait})
//
// Client keeps a free list of open AppendStream streams, so that
// concurrent callers each use one stream at a time and a stream is reused
// for the caller's next append:
//
//	c := appendstream.NewClient(sessionv1.NewSessionServiceClient(conn))
//	defer c.Close()
//	resp, err := c.Append(ctx, req) // err is the request's typed error
//
// BatchClient shares one AppendBatches stream among all its callers: the
// appends waiting when the stream is free to send go in one message. It
// is the cheaper client when many goroutines append at once; a caller's
// own appends keep their order only if it waits for each outcome:
//
//	b := appendstream.NewBatchClient(sessionv1.NewSessionServiceClient(conn))
//	defer b.Close()
//	resp, err := b.Append(ctx, req)
//
// A request's failure comes back as an *errs.Error with its code, as a
// unary call's status would be. A broken stream, or a caller's context
// that ends first, fails an append with UNAVAILABLE if it was not sent
// (nothing stored) or OUTCOME_UNKNOWN if it was (it may have committed); a
// retry with the same message ids is safe either way.
package appendstream
