package placement

import (
	"sync"

	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
)

// endpointWatch follows the remote's connections to other members, so that
// an attempt that got no answer can tell whether its request can have left
// this process at all.
//
// How the pinned remote carries a message to an address: the endpoint
// manager hands it to that address's endpoint writer, creating one if it
// has none; a writer sends only on a stream it connected, and publishes
// EndpointConnectedEvent once connected, before it sends anything. When the
// connection fails or breaks (or the member leaves), EndpointTerminatedEvent
// is published and the endpoint manager drops the writer in its handler of
// that event; a later message gets a new writer, which must connect first.
//
// So a request sent while the address was down (terminated since its last
// connection) and during whose attempt no connection to the address was
// made again never left this process: its writer never had a stream. The
// invariant this rests on: the watch's handler runs after the endpoint
// manager's within one Publish (the event stream calls subscribers in
// subscription order, and the watch subscribes in Bind, after the remote
// started), so "down" here means the manager already dropped the old
// writer. An address the watch has seen no event of is unknown: a
// connection made before Bind may be up, so a request to it counts as sent.
type endpointWatch struct {
	mu    sync.Mutex
	addrs map[string]*endpointState
	subscription
}

type endpointState struct {
	up       bool
	connects uint64 // EndpointConnectedEvents seen
}

// sendMark is an address's state as a request was sent to it.
type sendMark struct {
	addr     string
	known    bool
	up       bool
	connects uint64
}

// watch subscribes w to es's endpoint events (once per stream).
func (w *endpointWatch) watch(es *eventstream.EventStream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stream != es {
		w.addrs = map[string]*endpointState{}
	}
	w.follow(es, w.event)
}

func (w *endpointWatch) event(ev any) {
	var addr string
	var up bool
	switch e := ev.(type) {
	case *remote.EndpointConnectedEvent:
		addr, up = e.Address, true
	case *remote.EndpointTerminatedEvent:
		addr = e.Address
	default:
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.addrs[addr]
	if s == nil {
		s = &endpointState{}
		w.addrs[addr] = s
	}
	s.up = up
	if up {
		s.connects++
	}
}

// mark records addr's state before a request is sent to it.
func (w *endpointWatch) mark(addr string) sendMark {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.addrs[addr]
	if s == nil {
		return sendMark{addr: addr}
	}
	return sendMark{addr: addr, known: true, up: s.up, connects: s.connects}
}

// neverSent reports whether the request sent at m cannot have left this
// process: its address was known to be down then, and has not connected
// since.
func (w *endpointWatch) neverSent(m sendMark) bool {
	if !m.known || m.up {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.addrs[m.addr]
	return s != nil && s.connects == m.connects
}
