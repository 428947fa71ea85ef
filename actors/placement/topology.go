package placement

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
)

// topology is a Router's view of its member's cluster membership: the
// remote addresses of the members in the latest topology, and a channel
// that is closed when a later topology lost a member.
//
// It exists because the library answers nothing for a member that died: a
// request to it, or an owner lookup on it, waits out its whole timeout
// although the member's departure is known (the provider's poll) well
// before. Attempts wait on departed as well, and stop waiting as soon as
// the member they depend on is gone.
//
// A nil *topology is "not known yet" (no topology seen since the Router was
// bound): every address counts as present and departed never fires, so
// attempts simply wait out their timeout.
type topology struct {
	members  map[string]bool // remote addresses; immutable once published
	departed chan struct{}   // closed when a newer topology lost a member
	// owners places identities as the cluster's owner lookup (disthash's
	// rendezvous over the members) does for this topology.
	owners *cluster.Rendezvous
}

// has reports whether the member at addr is in t (or t is not known).
func (t *topology) has(addr string) bool {
	return t == nil || t.members[addr]
}

// changes returns the channel closed when a member leaves after t.
func (t *topology) changes() <-chan struct{} {
	if t == nil {
		return nil // blocks forever: nothing known, nothing to wait for
	}
	return t.departed
}

// topologyWatch keeps the latest topology of one member's cluster.
//
// Invariant: every topology published since the last departure shares one
// departed channel, which is open; it is closed exactly once, by the event
// that loses a member, which publishes a topology with a new channel.
type topologyWatch struct {
	mu      sync.Mutex // serializes updates (events come from one goroutine; this makes it not matter)
	current atomic.Pointer[topology]
	subscription
}

// watch subscribes w to es's cluster topology events. The library
// publishes them synchronously after updating its member list, its PID
// cache and its owner lookup, so a view loaded after departed fired
// agrees with the lookup that a retry will make.
func (w *topologyWatch) watch(es *eventstream.EventStream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.follow(es, func(ev any) {
		if t, ok := ev.(*cluster.ClusterTopology); ok {
			w.update(t)
		}
	})
}

func (w *topologyWatch) update(t *cluster.ClusterTopology) {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := &topology{members: make(map[string]bool, len(t.Members)), owners: cluster.NewRendezvous()}
	for _, m := range t.Members {
		next.members[m.Address()] = true
	}
	next.owners.UpdateMembers(t.Members)
	prev := w.current.Load()
	if prev != nil && len(t.Left) == 0 {
		next.departed = prev.departed
		w.current.Store(next)
		return
	}
	next.departed = make(chan struct{})
	w.current.Store(next)
	if prev != nil {
		close(prev.departed)
	}
}

// load returns the latest topology (nil before the first event).
func (w *topologyWatch) load() *topology { return w.current.Load() }

// subscription is a watch's subscription to one event stream at a time.
type subscription struct {
	stream *eventstream.EventStream
	sub    *eventstream.Subscription
}

// follow subscribes fn to es, ending the subscription to an earlier
// stream; it does nothing when es is the stream followed already, so a
// watch started before its member and again at Bind gets each event once.
// The watch's lock is held.
func (s *subscription) follow(es *eventstream.EventStream, fn func(any)) {
	if s.stream == es {
		return
	}
	if s.stream != nil {
		s.stream.Unsubscribe(s.sub)
	}
	s.stream, s.sub = es, es.Subscribe(fn)
}
