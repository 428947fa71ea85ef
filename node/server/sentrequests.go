package server

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
)

// sentRequests remembers, for each request this node sent to a peer from
// one of its futures, the peer's address: the only peer whose reply the
// future may receive. A future's id is a per-process counter ("future$N"),
// which any peer can guess; without this record a peer could answer
// requests that went to another member (acknowledging an append that
// member never stored).
//
// The record is made on the way out (the remote's client stream, before
// the request is on the wire, so before any reply can arrive) and taken
// when the reply is accepted. Requests nobody answers are forgotten after
// one to two periods of keep: the record is two generations of a map,
// rotated every keep (or when the newer one holds maxEntries), so it stays
// bounded whatever the peers do. keep must exceed every request timeout
// of the cluster: a reply that arrives later finds no future anyway.
type sentRequests struct {
	keep       time.Duration
	maxEntries int

	mu        sync.Mutex
	cur, prev map[string]string // future id -> address the request went to
	rotated   time.Time
}

func newSentRequests(keep time.Duration, maxEntries int) *sentRequests {
	return &sentRequests{keep: keep, maxEntries: maxEntries, cur: map[string]string{}, rotated: time.Now()}
}

// isFuture reports whether id names a future (a request's reply address).
func isFuture(id string) bool { return strings.HasPrefix(id, "future$") }

// record notes that the future id sent a request to addr.
func (r *sentRequests) record(id, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.rotated) >= r.keep || len(r.cur) >= r.maxEntries {
		r.prev, r.cur, r.rotated = r.cur, make(map[string]string, len(r.cur)), now
	}
	r.cur[id] = addr
}

// answeredBy reports whether a reply to the future id from the peer at
// addr is accepted: the future sent its request to addr. An accepted reply
// takes the record (a future receives one reply).
func (r *sentRequests) answeredBy(id, addr string) bool {
	if r == nil || addr == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range []map[string]string{r.cur, r.prev} {
		if to, ok := m[id]; ok {
			if to != addr {
				return false
			}
			delete(m, id)
			return true
		}
	}
	return false
}

// clientInterceptor records the requests of the local futures (senders at
// localAddr()) in each batch the remote sends.
func (r *sentRequests) clientInterceptor(localAddr func() string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &recordingStream{ClientStream: cs, sent: r, localAddr: localAddr}, nil
	}
}

type recordingStream struct {
	grpc.ClientStream
	sent      *sentRequests
	localAddr func() string
}

func (s *recordingStream) SendMsg(m any) error {
	if rm, ok := m.(*remote.RemoteMessage); ok && rm.GetMessageBatch() != nil {
		b := rm.GetMessageBatch()
		local := s.localAddr()
		for _, env := range b.Envelopes {
			if env.Sender <= 0 || int(env.Sender) > len(b.Senders) || int(env.Target) >= len(b.Targets) {
				continue
			}
			from := b.Senders[env.Sender-1]
			if from.GetAddress() == local && isFuture(from.GetId()) {
				s.sent.record(from.GetId(), b.Targets[env.Target].GetAddress())
			}
		}
	}
	return s.ClientStream.SendMsg(m)
}
