// Package client is the Go client of an agentstate node: dialing (TLS,
// bearer token, truthful outcomes, the generated-code codec), and the
// streaming append clients.
//
// Dial connects; the generated stubs make the unary calls:
//
//	conn, err := client.Dial("127.0.0.1:7420", client.Options{Token: tok, TLS: true})
//	sessions := sessionv1.NewSessionServiceClient(conn)
//	resp, err := sessions.Append(ctx, req)
//
// The connection's unary calls tell the truth about a failure
// (OutcomeOptions): UNAVAILABLE only when nothing of the request can have
// reached the node, OUTCOME_UNKNOWN when a write was sent and its answer
// lost.
//
// In a cluster, Options.RouteToOwner sends each request of a session or
// plan straight to the member that owns it, once a member has named it in
// its answer (OwnerRouter), instead of through the dialled member, which
// forwards it.
//
// StreamClient keeps a free list of open AppendStream streams, so that
// concurrent callers each use one stream at a time and a stream is reused
// for the caller's next append:
//
//	c := client.NewStreamClient(sessions)
//	defer c.Close()
//	resp, err := c.Append(ctx, req) // err is the request's typed error
//
// BatchClient shares one AppendBatches stream among all its callers: the
// appends waiting when the stream is free to send go in one message. It
// is the cheaper client when many goroutines append at once; a caller's
// own appends keep their order only if it waits for each outcome:
//
//	b := client.NewBatchClient(sessions)
//	defer b.Close()
//	resp, err := b.Append(ctx, req)
//
// On a connection made by Dial, every call's and stream's error matches
// the errs sentinels directly — errors.Is(err, errs.ErrFailedPrecondition),
// no errs.From needed — and is still its gRPC status (status.Code): a
// *StatusError, or an *errs.Error where the client decided the outcome.
//
// A request's failure comes back as an *errs.Error with its code, as a
// unary call's status would be. A broken stream, or a caller's context
// that ends first, fails an append with UNAVAILABLE if it was not sent
// (nothing stored) or OUTCOME_UNKNOWN if it was (it may have committed); a
// retry with the same message ids is safe either way.
//
// The package imports nothing of the node's server side, and registers
// nothing process-wide: its codec is forced per connection.
package client
