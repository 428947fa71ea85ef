package server

import (
	"context"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/peer"
)

// Pacing a principal's connections.
//
// A principal holding its share of the requests in flight has its next
// streams refused on their headers (streamTap), but its client has sent
// their DATA frames by then, up to the stream window each, and the
// transport reads and discards them: a flood of 3 MiB appends refused at
// once still makes the node (and the machine) move hundreds of MB/s, CPU
// that every other principal's requests then wait for. So a connection on
// which a stream was refused for its principal's share is marked with that
// principal, and while the principal holds its share, reading from the
// connection pauses (paceStep at a time, at most paceMax per read): TCP
// flow control then holds the client's bytes in its own buffers. The
// principal's requests in flight go on, and once it is under its share
// again its connections are read at full speed. Connections never refused
// are never paced, and an unmarked read costs one atomic load.
const (
	paceStep = 5 * time.Millisecond
	paceMax  = 500 * time.Millisecond
)

// markPaced marks the connection of the stream whose context is ctx as
// principal's, to be paced while over reports the principal over its share.
func (t *connTracker) markPaced(ctx context.Context, principal string) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil || t.over == nil {
		return
	}
	t.mu.Lock()
	c, _ := t.conns[p.Addr.String()].(*trackedConn)
	t.mu.Unlock()
	if c == nil {
		return
	}
	if old := c.paced.Load(); old == nil || *old != principal {
		c.paced.Store(&principal)
	}
}

func (c *trackedConn) Read(b []byte) (int, error) {
	if p := c.paced.Load(); p != nil {
		for waited := time.Duration(0); waited < paceMax && c.t.over(*p); waited += paceStep {
			time.Sleep(paceStep)
		}
	}
	return c.Conn.Read(b)
}

// pacedPrincipal is the principal a connection is paced as (nil: none).
type pacedPrincipal = atomic.Pointer[string]
