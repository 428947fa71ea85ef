package directory

import (
	"context"
	"sync"
)

// Owner hints. A cluster member that forwards a request to the member
// owning its session or plan can tell the caller where that owner is, so
// that the caller's next requests go there directly (sessionv1.OwnerHeader
// on the gRPC API). The transport that answers the caller puts an
// OwnerSink in the request's context (WithOwnerSink); the Router notes in
// it the gRPC address of the member whose owner answered (NoteOwner).
//
// Contract: NoteOwner is called only for an owner on another member whose
// answer was received (a response, or a typed error the owner answered),
// never for an owner in this process, nor when no answer came (the owner
// in doubt). Without a sink in the context NoteOwner does nothing and
// costs one context lookup. A sink keeps the last address noted: a request
// routed more than once names the owner that answered last.

// ownerSinkKey keys the OwnerSink in a context.
type ownerSinkKey struct{}

// OwnerSink receives the address of the member that owns a request's
// session or plan. It is safe for concurrent use.
type OwnerSink struct {
	mu   sync.Mutex
	addr string
}

// WithOwnerSink returns ctx carrying a new, empty OwnerSink, and the sink.
func WithOwnerSink(ctx context.Context) (context.Context, *OwnerSink) {
	s := &OwnerSink{}
	return context.WithValue(ctx, ownerSinkKey{}, s), s
}

// NoteOwner records grpcAddr (host:port) in ctx's OwnerSink, if it has one
// and grpcAddr is not empty (the owner's member published no address).
func NoteOwner(ctx context.Context, grpcAddr string) {
	if grpcAddr == "" {
		return
	}
	if s, ok := ctx.Value(ownerSinkKey{}).(*OwnerSink); ok {
		s.mu.Lock()
		s.addr = grpcAddr
		s.mu.Unlock()
	}
}

// Owner returns the address noted last ("" when none was).
func (s *OwnerSink) Owner() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}
