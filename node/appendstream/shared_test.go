package appendstream_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/appendstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestAppendBatchesSharesOneBudgetAcrossStreams: the appends of all
// streams being served at once are bounded by TotalAppends, not by each
// stream's MaxAppends times the streams (issue 15: 40 streams held 21,000
// worker goroutines). Three streams with room for 8 appends each send 8
// appends the service holds; with a shared room of 8, 8 are served at
// once and the rest wait, then all are answered.
func TestAppendBatchesSharesOneBudgetAcrossStreams(t *testing.T) {
	const streams, perStream, total = 3, 8, 8
	svc := &echo{release: make(chan struct{}), held: make(chan struct{}, streams*perStream)}
	h := newLimitHarness(t, svc, appendstream.Limits{MaxAppends: perStream, TotalAppends: total})
	api := h.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var opened []sessionv1.SessionService_AppendBatchesClient
	for range streams {
		stream, err := api.AppendBatches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(batchOf("hold", 0, perStream)); err != nil {
			t.Fatal(err)
		}
		opened = append(opened, stream)
	}
	for range total {
		<-svc.held
	}
	// A call on the same connection after the batches: once answered,
	// the node's transport has read the batches too, so that an append
	// past the shared bound would now be served (and counted in peak)
	// if nothing held it back.
	if _, err := api.Get(ctx, &sessionv1.GetSessionRequest{SessionId: "x"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Get: %v", err)
	}
	close(svc.release)
	for i, stream := range opened {
		answered := 0
		for answered < perStream {
			out, err := stream.Recv()
			if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			answered += len(out.GetOutcomes())
		}
	}
	if peak := svc.peak.Load(); peak != total {
		t.Fatalf("%d appends of %d streams were served at once, want the shared bound %d", peak, streams, total)
	}
}

// TestAppendBatchesBoundsIdleWorkersAcrossStreams: a stream keeps the
// workers of its busiest moment for reuse, so many open streams that were
// each busy once would hold their peaks' goroutines until they end. The
// idle workers of all streams are bounded by TotalAppends: after 20
// streams each had 16 appends served at once and stay open, the process
// has not 20 × 16 more goroutines but about the streams' own.
func TestAppendBatchesBoundsIdleWorkersAcrossStreams(t *testing.T) {
	const streams, burst = 20, 16
	svc := &echo{release: make(chan struct{}), held: make(chan struct{}, burst)}
	h := newLimitHarness(t, svc, appendstream.Limits{TotalAppends: burst})
	api := h.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := roundTrip(ctx, api, 10); err != nil { // warms the connection
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	var open []sessionv1.SessionService_AppendBatchesClient
	defer func() {
		for _, s := range open {
			s.CloseSend() //nolint:errcheck // the test is over
		}
	}()
	for i := range streams {
		stream, err := api.AppendBatches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, stream)
		if err := stream.Send(batchOf("hold", 0, burst)); err != nil {
			t.Fatal(err)
		}
		// All of the burst served at once: one worker each.
		for range burst {
			<-svc.held
		}
		for range burst {
			svc.release <- struct{}{}
		}
		for answered := 0; answered < burst; {
			out, err := stream.Recv()
			if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			answered += len(out.GetOutcomes())
		}
	}
	// Each open stream costs a few goroutines of its own (its handler,
	// receiver and transport, both sides); the idle workers of all of
	// them together at most TotalAppends. Workers end asynchronously
	// after their last outcome, so wait for the count to come down,
	// bounded by ctx.
	bound := before + streams*6 + burst
	for runtime.NumGoroutine() > bound {
		select {
		case <-ctx.Done():
			t.Fatalf("%d goroutines with %d open streams, want at most %d (before: %d): the streams keep their idle workers",
				runtime.NumGoroutine(), streams, bound, before)
		case <-time.After(10 * time.Millisecond): // polling a count, not ordering events
		}
	}
}

// TestAppendBatchesUnreadStreamHoldsNoSharedRoom: an outcome decided and
// not yet sent counts against its own stream only. Streams whose clients
// never read fill their own budgets with unsent outcomes; an honest stream
// is still served, long before the unread streams are ended (SendTimeout).
func TestAppendBatchesUnreadStreamHoldsNoSharedRoom(t *testing.T) {
	const hostile, total = 4, 8
	svc := &echo{reply: 2048}
	h := newLimitHarness(t, svc, appendstream.Limits{MaxAppends: 64, TotalAppends: total, SendTimeout: 5 * time.Minute})
	api := h.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	attack, stopAttack := context.WithCancel(ctx)
	var senders sync.WaitGroup
	defer func() {
		stopAttack()
		senders.Wait()
	}()
	for i := range hostile {
		stream, err := api.AppendBatches(attack)
		if err != nil {
			t.Fatal(err)
		}
		senders.Add(1)
		go func() {
			defer senders.Done()
			for n := 0; ; n += 64 {
				if stream.Send(batchOf(fmt.Sprintf("hostile-%d", i), n, 64)) != nil {
					return
				}
			}
		}()
	}
	// Until the unread streams are served to their bound, an honest
	// stream's round trip proves nothing; once they are, it must
	// succeed. served only grows, so poll it.
	for svc.served.Load() < hostile*64 {
		select {
		case <-ctx.Done():
			t.Fatalf("the unread streams were served %d appends, want at least %d", svc.served.Load(), hostile*64)
		case <-time.After(10 * time.Millisecond): // polling a count, not ordering events
		}
	}
	if err := roundTrip(ctx, api, 100); err != nil {
		t.Fatalf("an honest stream among %d unread ones: %v", hostile, err)
	}
	if n := len(h.endings()); n != 0 {
		t.Fatalf("%d streams ended before their send timeout", n)
	}
}
