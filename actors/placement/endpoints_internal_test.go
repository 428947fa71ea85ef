package placement

import (
	"testing"

	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
)

// A request counts as never sent only if its address was known to be down
// when it was sent and did not connect again before the attempt failed.
func TestEndpointWatchNeverSent(t *testing.T) {
	es := eventstream.NewEventStream()
	var w endpointWatch
	w.watch(es)
	const a = "127.0.0.1:9"
	up := func() { es.Publish(&remote.EndpointConnectedEvent{Address: a}) }
	down := func() { es.Publish(&remote.EndpointTerminatedEvent{Address: a}) }

	if w.neverSent(w.mark(a)) {
		t.Error("an address never seen counted as down (a connection made before the watch may be up)")
	}
	up()
	if w.neverSent(w.mark(a)) {
		t.Error("sent while connected, counted as never sent")
	}
	down()
	m := w.mark(a)
	if !w.neverSent(m) {
		t.Error("sent while down, never reconnected: counted as sent")
	}
	down() // a new writer failing to connect
	if !w.neverSent(m) {
		t.Error("a failed reconnection made the request count as sent")
	}
	up()
	if w.neverSent(m) {
		t.Error("reconnected after the send (the writer may have sent it): counted as never sent")
	}
	down()
	if w.neverSent(m) {
		t.Error("reconnected and down again after the send: counted as never sent")
	}
	if w.neverSent(w.mark("127.0.0.1:10")) {
		t.Error("another address inherited the state")
	}
}
