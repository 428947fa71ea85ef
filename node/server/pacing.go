package server

import (
	"context"
	"time"

	"github.com/agentstate/agentstate/actors/fairshare"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// pacing holds each principal to its share of the node's work rate
// (fairshare.Pacer): a stats handler charges every message received to
// its stream's principal (its wire bytes, plus OpCost per operation it
// carries), a stream's sends and a unary call's answer are charged their
// size, and the node waits out a principal's lead before it decodes a
// unary request (requestBudget.decode), before it returns a stream's next
// message and before it sends a stream's next message (charged first, so
// that hundreds of tails starting at once are paced from their first
// message on). A waiting unary call holds its caller; a waiting stream
// stops reading, so TCP flow control holds a streaming client at its share
// too.
type pacing struct {
	p *fairshare.Pacer
}

// operations is what a message carries that the node executes one by one
// (sessionv1.AppendBatch); any other message is one operation.
type operations interface{ Operations() int }

func (g pacing) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (g pacing) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (g pacing) HandleConn(context.Context, stats.ConnStats) {}

// HandleRPC charges a received message its wire bytes and one operation;
// the messages reach it undecoded (codec.Undecoded), so a batch's further
// operations are charged once it is decoded (received).
func (g pacing) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InPayload); ok {
		g.p.Charge(fairshare.From(ctx), int64(in.WireLength)+fairshare.OpCost)
	}
}

// sized is a message that knows its encoded size (vtprotobuf's
// generated code, codec.Tracked).
type sized interface{ SizeVT() int }

func sizeOf(m any) int64 {
	if s, ok := m.(sized); ok {
		return int64(s.SizeVT())
	}
	return 0
}

// unary charges a unary call's answer to its principal.
func (g pacing) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if name := fairshare.From(ctx); name != "" && resp != nil {
		g.p.Charge(name, sizeOf(resp))
	}
	return resp, err
}

// received charges the operations a stream's decoded message carries
// beyond the one its receipt was charged (a stream's messages reach the
// stats handler undecoded: codec.Undecoded), and waits out the lead that
// charge adds. A message of one operation was waited for already, before
// it was decoded (pacedStream.RecvMsg, on the same principal: both read
// the name streamTap put in the stream's context), so it costs no second
// wait.
func (g pacing) received(ctx context.Context, msg any) error {
	name := fairshare.From(ctx)
	if name == "" {
		return nil
	}
	m, ok := msg.(operations)
	if !ok || m.Operations() <= 1 {
		return nil
	}
	g.p.Charge(name, int64(m.Operations()-1)*fairshare.OpCost)
	return g.p.Wait(ctx, name)
}

// stream waits out the principal's lead on every message of a stream.
func (g pacing) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	name := fairshare.From(ss.Context())
	if name == "" {
		return handler(srv, ss)
	}
	return handler(srv, &pacedStream{ServerStream: ss, g: g, name: name})
}

type pacedStream struct {
	grpc.ServerStream
	g    pacing
	name string
}

// RecvMsg waits out the lead once a message's bytes arrived, before they
// are decoded: a stream whose messages fail to decode (the deep Imports of
// issue 26) is paced like any other, not refused as fast as it sends.
func (s *pacedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.g.p.Wait(s.Context(), s.name)
}

func (s *pacedStream) SendMsg(m any) error {
	s.g.p.Charge(s.name, sizeOf(m))
	if err := s.g.p.Wait(s.Context(), s.name); err != nil {
		return err
	}
	return s.ServerStream.SendMsg(m)
}

// maxUnaryWait is the longest a unary request waits for its principal's
// share before it is decoded. A principal further ahead (a flood of large
// requests, each charged on arrival) has its requests refused
// RESOURCE_EXHAUSTED instead, and its new streams refused on their
// headers (streamTap), with its connection paused for the lead: holding
// its requests longer would hold their bytes, and letting them through
// after a bounded wait would let a flood through at its concurrency
// divided by the wait.
const maxUnaryWait = 500 * time.Millisecond

// ahead is the refusal of a request of principal, which runs ahead of its
// share of the node's work rate by lead.
func ahead(principal string, lead time.Duration) error {
	return errs.ResourceExhausted("principal %q is %v ahead of its share of the node's work rate (--grpc-share-rate) while others use the node: retry later",
		principal, lead.Round(time.Millisecond))
}

// pauseAfterAuthFailure is how long a connection is not read after one of
// its streams presented no valid credential: a client retrying a wrong
// token in a loop is answered four times a second per connection, not as
// fast as the node can refuse (each refusal costs the node a credential
// check and an audit entry's rate-limited attempt).
const pauseAfterAuthFailure = 250 * time.Millisecond

// pauseAfterShareRefusal is how long, at most, a connection is not read
// after one of its streams was refused for its principal's share: the
// client's retries of a refused large request would otherwise send its
// bytes again and again as fast as they are refused.
const pauseAfterShareRefusal = 200 * time.Millisecond

// paceBatch charges what a screened batch asks of the node to the remote
// endpoint's peers (fairshare.RemotePeers) and waits out their lead: the
// stream is not read meanwhile, so a flooding peer is held by flow control.
func (g *remoteGuard) paceBatch(ctx context.Context, b *remote.MessageBatch) error {
	p := g.pace.Load()
	if p == nil || len(b.Envelopes) == 0 {
		return nil
	}
	cost := int64(len(b.Envelopes)) * fairshare.OpCost
	for _, env := range b.Envelopes {
		cost += int64(len(env.GetMessageData()))
	}
	p.Charge(fairshare.RemotePeers, cost)
	return p.Wait(ctx, fairshare.RemotePeers)
}
