package feedstream_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	"github.com/agentstate/agentstate/node/feedstream"
)

// TestStalledTailsLeaveOtherConnectionsTheirRoom is issue 26 in small: a
// client opens tails of a session of large messages and never reads them.
// They hold at most their connection's room, so another connection's
// tail reads the whole session and each new message, and the node holds
// no more than that connection's room once the honest reader is done.
// Closing the stalled client's connection gives its room back.
func TestStalledTailsLeaveOtherConnectionsTheirRoom(t *testing.T) {
	const msgs, size = 16, 128 << 10
	lim := feedstream.Limits{TotalBytes: 1 << 20, ConnBytes: 512 << 10, StallTimeout: time.Hour}
	h := newHarness(t, lim)
	id := h.session(msgs, size)
	hostile := h.dial(true)
	h.stall(hostile, id, 8)
	// The stalled tails fill their connection's room.
	h.until("the stalled tails to hold their connection's room", func() bool {
		return h.feeds.HeldBytes() > lim.ConnBytes-size
	})

	honest := h.dial(false)
	done := make(chan []int64)
	go func() { done <- h.read(honest, id, 0, msgs+4) }()
	h.append(id, 4, size)
	seqs := <-done
	for i, s := range seqs {
		if s != int64(i) {
			t.Fatalf("the honest tail delivered %v, want 0..%d in order", seqs, msgs+3)
		}
	}
	// The honest tail's events are counted out as its transport frees
	// them, just after they were written: then only the stalled
	// connection's room is held.
	h.until("the node to hold no more than the stalled connection's room", func() bool {
		return h.feeds.HeldBytes() <= lim.ConnBytes
	})

	hostile.Close()
	h.until("the closed connection's room to be given back", func() bool { return h.feeds.HeldBytes() == 0 })
}

// TestTailsUnderATightBudgetDeliverEverythingInOrder: tails that find no
// room drop their page and rewind, and send at most a window (StreamBytes)
// of each page; each still delivers every message exactly once, in order.
// Four tails on one connection share room for about three of the
// messages.
func TestTailsUnderATightBudgetDeliverEverythingInOrder(t *testing.T) {
	const msgs, size = 24, 64 << 10
	h := newHarness(t, feedstream.Limits{TotalBytes: 200 << 10, ConnBytes: 200 << 10, StreamBytes: 100 << 10, StallTimeout: time.Hour})
	id := h.session(msgs/2, size)
	cc := h.dial(false)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seqs := h.read(cc, id, 0, msgs)
			for i, s := range seqs {
				if s != int64(i) {
					errs <- fmt.Errorf("delivered %v, want 0..%d in order", seqs, msgs-1)
					return
				}
			}
		}()
	}
	h.append(id, msgs/2, size)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestAStalledTailEndsAndItsConnectionCloses: a tail whose client reads
// none of its sent events for StallTimeout ends; the node closes its
// connection (OnStall), which gives its room back, while a tail on
// another connection that reads goes on.
func TestAStalledTailEndsAndItsConnectionCloses(t *testing.T) {
	const size = 256 << 10
	h := newHarness(t, feedstream.Limits{StallTimeout: 200 * time.Millisecond})
	id := h.session(8, size)
	hostile := h.dial(true)
	h.stall(hostile, id, 1)
	select {
	case <-h.stalls:
	case <-h.ctx.Done():
		t.Fatal("the stalled tail never ended")
	}
	h.until("the stalled connection's room to be given back", func() bool { return h.feeds.HeldBytes() == 0 })

	// A reader is not stalled, however long it takes: it reads 8 pages
	// of 256 KiB through a 64 KiB window.
	if seqs := h.read(h.dial(true), id, 0, 8); len(seqs) != 8 {
		t.Fatalf("the reading tail delivered %v", seqs)
	}
	select {
	case addr := <-h.stalls:
		t.Fatalf("a tail of %s that read was ended as stalled", addr)
	default:
	}
}

// TestTailsSendTheirHeadersOnSubscribing: a client learns that its tail
// is subscribed before any event, even from now on a quiet session.
func TestTailsSendTheirHeadersOnSubscribing(t *testing.T) {
	h := newHarness(t, feedstream.Limits{})
	id := h.session(0, 0)
	st, err := feedv1.NewFeedServiceClient(h.dial(false)).TailSession(h.ctx, &feedv1.TailSessionRequest{SessionId: id, FromNow: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Header(); err != nil {
		t.Fatal(err)
	}
}

// TestAnUnreadTailLeavesItsConnectionsOtherTailsRoom: a client with two
// tails on one connection that reads one to its end before it reads the
// other. The unread one holds its window (StreamBytes) of the
// connection's room, not all of it, so the read one goes on.
func TestAnUnreadTailLeavesItsConnectionsOtherTailsRoom(t *testing.T) {
	const msgs, size = 16, 128 << 10
	h := newHarness(t, feedstream.Limits{ConnBytes: 1 << 20, StreamBytes: 256 << 10, StallTimeout: time.Hour})
	id := h.session(msgs, size)
	cc := h.dial(true)
	h.stall(cc, id, 1)
	h.until("the unread tail to hold its window", func() bool { return h.feeds.HeldBytes() >= 256<<10 })
	if seqs := h.read(cc, id, 0, msgs); len(seqs) != msgs {
		t.Fatalf("the read tail delivered %v", seqs)
	}
}

// TestChangeTailsSendPagesInWindows: a change tail whose window holds
// about one entry still delivers every entry once, in position order.
func TestChangeTailsSendPagesInWindows(t *testing.T) {
	h := newHarness(t, feedstream.Limits{StreamBytes: 256})
	for range 30 {
		h.session(0, 0) // a session_created entry each
	}
	st, err := feedv1.NewFeedServiceClient(h.dial(false)).TailChanges(h.ctx, &feedv1.TailChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for n := 0; n < 30; {
		ev, err := st.Recv()
		if err != nil {
			t.Fatalf("after %d entries: %v", n, err)
		}
		e := ev.GetEntry()
		if e == nil {
			t.Fatalf("unexpected event %v", ev)
		}
		if e.GetPosition() != last+1 {
			t.Fatalf("entry at position %d after %d", e.GetPosition(), last)
		}
		last = e.GetPosition()
		if e.GetEventType() == "session_created" {
			n++
		}
	}
}
