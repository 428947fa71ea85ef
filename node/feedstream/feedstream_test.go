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
	if held := h.feeds.HeldBytes(); held > lim.ConnBytes+size {
		// The honest tail's last events may not be counted out yet.
		t.Fatalf("the node holds %d bytes for the tails, want at most the stalled connection's %d (plus one page)", held, lim.ConnBytes)
	}

	hostile.Close()
	h.until("the closed connection's room to be given back", func() bool { return h.feeds.HeldBytes() == 0 })
}

// TestTailsUnderATightBudgetDeliverEverythingInOrder: tails that find no
// room drop their page and rewind; each still delivers every message
// exactly once, in order. Four tails on one connection share room for
// about three of the messages.
func TestTailsUnderATightBudgetDeliverEverythingInOrder(t *testing.T) {
	const msgs, size = 24, 64 << 10
	h := newHarness(t, feedstream.Limits{TotalBytes: 200 << 10, ConnBytes: 200 << 10, StallTimeout: time.Hour})
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
