package feedstream

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/agentstate/agentstate/actors/feed"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/node/codec"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Server is the gRPC FeedService over a hub. The node's server must use
// node/codec (grpc.ForceServerCodecV2), which tells it when the transport
// let an event out, and call ConnClosed as each client connection closes.
type Server struct {
	feedv1.UnimplementedFeedServiceServer
	Hub    *feed.Hub
	Limits Limits
	// OnStall, when set, is called with the context of a stream that
	// stalled: the node closes its connection, since the transport keeps
	// the events it holds (and the stream's room) until the client reads
	// them or the connection closes.
	OnStall func(context.Context)

	once  sync.Once
	space *room
}

func (s *Server) room() *room {
	s.once.Do(func() { s.space = newRoom(s.Limits) })
	return s.space
}

// HeldBytes is what the feed streams hold now: pages read and not yet
// sent, and sent events the transport still holds.
func (s *Server) HeldBytes() int64 { return s.room().Held() }

// ConnClosed gives back the room of the connection whose remote address
// is addr: its transport dropped the events it held.
func (s *Server) ConnClosed(addr string) { s.room().connClosed(addr) }

func (s *Server) TailSession(req *feedv1.TailSessionRequest, stream grpc.ServerStreamingServer[feedv1.SessionEvent]) error {
	t, err := s.Hub.TailSession(stream.Context(), req)
	if err != nil {
		return toStatus(err)
	}
	defer t.Close()
	return serve(s, stream, t.Next, t.Sequence, t.Rewind, sessionCursor)
}

func (s *Server) TailChanges(req *feedv1.TailChangesRequest, stream grpc.ServerStreamingServer[feedv1.ChangeEvent]) error {
	t, err := s.Hub.TailChanges(stream.Context(), req)
	if err != nil {
		return toStatus(err)
	}
	defer t.Close()
	return serve(s, stream, t.Next, t.Position, t.Rewind, changeCursor)
}

// msgHeader is gRPC's prefix of each message on the wire.
const msgHeader = 5

// serve sends a tail's events until it ended (its last event says why),
// the client went away, or it stalled. Each page takes room for its
// encoded size before any of it is sent; when there is none now, the page
// is dropped and the tail rewound to before it, and the stream waits for
// that much room holding nothing, then reads the page again. Each event's
// part is given back once the transport let it out (codec.Tracked). A
// stream sends at most StreamBytes of a page at once (the tail is rewound
// to after what it sends), and one whose client has not read StreamBytes
// of what it sent waits before reading more: a client that does not read a stream holds that
// much of its connection's room, its tails together the connection's room,
// never more.
func serve[E codec.Marshaler](s *Server, stream grpc.ServerStream, next func(context.Context) ([]E, error),
	cursor func() int64, rewind func(int64), after func(E) (int64, bool)) error {
	// Headers first: the client knows it is subscribed (from_now counts
	// from here) before any event.
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	ctx, stall := context.WithCancelCause(stream.Context())
	defer stall(nil)
	onStall := func() {
		stall(errStalled(s.room().lim))
		if s.OnStall != nil {
			s.OnStall(stream.Context())
		}
	}
	snd := s.room().sender(peerKey(ctx), onStall)
	defer snd.close()
	var reserved int64 // room taken and not yet leased to events
	defer func() { snd.give(reserved) }()
	fail := func(err error) error {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
		return err
	}
	for {
		// The stream's window: what its client has not read yet holds
		// its connection's room; past StreamBytes it waits for that.
		if err := snd.waitSent(ctx, snd.r.lim.StreamBytes); err != nil {
			return fail(err)
		}
		mark := cursor()
		evs, err := next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fail(toStatus(err))
		}
		sizes := make([]int64, len(evs))
		var need int64
		for i, ev := range evs {
			sizes[i] = int64(ev.SizeVT()) + msgHeader
			need += sizes[i]
		}
		// At most a window's worth of the page (at least one event): the
		// rest is read again once the client took that.
		if k := within(sizes, snd.r.lim.StreamBytes); k < len(evs) {
			if c, ok := after(evs[k-1]); ok {
				rewind(c)
				clear(evs[k:])
				evs, sizes = evs[:k], sizes[:k]
				need = 0
				for _, n := range sizes {
					need += n
				}
			}
		}
		need = min(need, snd.r.most)
		if need > reserved {
			got, ok := snd.tryTake(need - reserved)
			if !ok {
				// No room now: hold nothing while waiting for it.
				rewind(mark)
				clear(evs)
				snd.give(reserved)
				if reserved, err = snd.take(ctx, need); err != nil {
					return fail(err)
				}
				continue
			}
			reserved += got
		}
		snd.give(reserved - need)
		reserved = need
		for i, ev := range evs {
			n := min(sizes[i], reserved)
			reserved -= n
			l := snd.lease(n)
			msg := &codec.Tracked{Message: ev, Released: l.release, Progress: l.progress}
			err := stream.SendMsg(msg)
			if !msg.Encoded() {
				l.release()
			}
			evs[i] = *new(E)
			if err != nil {
				return fail(err)
			}
		}
	}
}

// within is how many of the first sizes fit in limit, at least one.
func within(sizes []int64, limit int64) int {
	var sum int64
	for i, n := range sizes {
		if sum += n; sum > limit && i > 0 {
			return i
		}
	}
	return len(sizes)
}

// sessionCursor is a session tail's cursor once it delivered ev (false:
// ev ends the tail).
func sessionCursor(ev *feedv1.SessionEvent) (int64, bool) {
	if m := ev.GetMessage(); m != nil {
		return m.GetSequence() + 1, true
	}
	if t := ev.GetTruncated(); t != nil {
		return t.GetToSequence(), true
	}
	if r := ev.GetRewound(); r != nil {
		return r.GetFromSequence(), true
	}
	return 0, false
}

// changeCursor is a change tail's cursor once it delivered ev (false: ev
// ends the tail).
func changeCursor(ev *feedv1.ChangeEvent) (int64, bool) {
	if e := ev.GetEntry(); e != nil {
		return e.GetPosition(), true
	}
	if p := ev.GetPruned(); p != nil {
		return p.GetToPosition(), true
	}
	return 0, false
}

// peerKey names a stream's connection as the node's listener does: by its
// client's address.
func peerKey(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// errStalled ends a stream whose client stopped reading its events.
func errStalled(l Limits) error {
	return errs.ResourceExhausted("this feed's events were not read for %v: the node stopped serving it; "+
		"resume from the last sequence or position received", l.StallTimeout)
}

func toStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return errs.From(err)
}
