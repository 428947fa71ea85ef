package writer_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/agentstate/agentstate/actors/writer"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

func wantPending(t *testing.T, b *writer.Backlog, slots int, bytes int64) {
	t.Helper()
	if p, pb := b.Pending(), b.PendingBytes(); p != slots || pb != bytes {
		t.Fatalf("pending %d slots, %d bytes; want %d, %d", p, pb, slots, bytes)
	}
}

// TestBacklogBoundsBytes: network senders are refused once the bytes would
// pass the budget, however many slots are free, and nothing is held by a
// refused sender.
func TestBacklogBoundsBytes(t *testing.T) {
	b := writer.NewBacklog(100, 1000)
	if b.Cap() != 100 || b.CapBytes() != 1000 {
		t.Fatalf("caps %d, %d", b.Cap(), b.CapBytes())
	}
	for range 3 {
		if err := b.TryAcquire(300); err != nil {
			t.Fatal(err)
		}
	}
	wantPending(t, b, 3, 900)
	if err := b.TryAcquire(101); !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("past the byte budget: %v, want RESOURCE_EXHAUSTED", err)
	}
	wantPending(t, b, 3, 900)
	if err := b.TryAcquire(100); err != nil { // exactly fills it
		t.Fatal(err)
	}
	b.Release(100)
	for range 3 {
		b.Release(300)
	}
	wantPending(t, b, 0, 0)
}

// TestBacklogBoundsCount: the count bound holds for commands of no size.
func TestBacklogBoundsCount(t *testing.T) {
	b := writer.NewBacklog(2, 1000)
	for range 2 {
		if err := b.TryAcquire(0); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.TryAcquire(0); !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("past the count: %v", err)
	}
	wantPending(t, b, 2, 0)
}

// TestBacklogAdmitsAnOversizedCommandAlone: a command larger than the
// whole budget takes all of it: admitted when nothing else holds bytes,
// refused (network) or made to wait (in process) otherwise.
func TestBacklogAdmitsAnOversizedCommandAlone(t *testing.T) {
	b := writer.NewBacklog(10, 1000)
	if err := b.TryAcquire(5000); err != nil {
		t.Fatalf("oversized command on an empty backlog: %v", err)
	}
	wantPending(t, b, 1, 1000)
	if err := b.TryAcquire(1); !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("beside an oversized command: %v", err)
	}
	b.Release(5000)
	wantPending(t, b, 0, 0)

	if err := b.TryAcquire(1); err != nil {
		t.Fatal(err)
	}
	if err := b.TryAcquire(5000); !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("oversized command beside another: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Acquire(context.Background(), 5000) }()
	select {
	case err := <-got:
		t.Fatalf("in-process oversized command did not wait: %v", err)
	default:
	}
	b.Release(1)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	wantPending(t, b, 1, 1000)
	b.Release(5000)
}

// TestBacklogWaitersComeFirst: while an in-process sender waits for
// bytes, a network sender is refused even if its own bytes would fit, so
// a large command is not starved by small ones.
func TestBacklogWaitersComeFirst(t *testing.T) {
	b := writer.NewBacklog(10, 1000)
	if err := b.TryAcquire(600); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Acquire(context.Background(), 600) }()
	// The waiter is queued once a small request that fits is refused.
	for b.TryAcquire(10) == nil {
		b.Release(10)
		runtime.Gosched()
	}
	b.Release(600)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	wantPending(t, b, 1, 600)
	b.Release(600)
}

// TestBacklogCancelledWaitHoldsNothing: an in-process sender whose context
// ends while waiting for bytes gets UNAVAILABLE and gives back its slot.
func TestBacklogCancelledWaitHoldsNothing(t *testing.T) {
	b := writer.NewBacklog(10, 1000)
	if err := b.TryAcquire(1000); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Admit(ctx, 1); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("cancelled wait: %v, want UNAVAILABLE", err)
	}
	if _, err := b.Admit(writer.NoWait(context.Background()), 1); !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("network sender: %v, want RESOURCE_EXHAUSTED", err)
	}
	wantPending(t, b, 1, 1000)
	b.Release(1000)
	wantPending(t, b, 0, 0)
}

// TestTryAdmitReleasesWhatItTook: the release TryAdmit returns gives back
// the size the request was admitted with, even if the request grows after.
func TestTryAdmitReleasesWhatItTook(t *testing.T) {
	b := writer.NewBacklog(10, 1<<20)
	req := &sessionv1.CreateSessionRequest{ActorName: "a"}
	release, err := b.TryAdmit("", req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.PendingBytes(), int64(writer.RequestSize(req)); got != want || want == 0 {
		t.Fatalf("pending %d bytes, want %d", got, want)
	}
	req.SessionId = "01J0000000000000000000000A" // as routing does for a create
	release()
	wantPending(t, b, 0, 0)
}

// TestFloodingPrincipalLeavesAnotherItsShare: a principal that filled the
// backlog's bytes is held to half of them once another principal is
// refused, and what it gives back goes to the other until each holds
// half; the slots are apportioned the same way.
func TestFloodingPrincipalLeavesAnotherItsShare(t *testing.T) {
	b := writer.NewBacklog(1000, 100)
	flood := 0
	for b.TryAcquireAs("flood", 10) == nil {
		flood++
	}
	if flood != 10 {
		t.Fatalf("alone, the flood took %d of 10 requests' bytes", flood)
	}
	if err := b.TryAcquireAs("honest", 10); !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("a full backlog admitted honest: %v", err)
	}
	// The flood's requests are answered one by one, and it asks again
	// each time: refused until it holds its half.
	for ; flood > 5; flood-- {
		b.ReleaseAs("flood", 10)
		if err := b.TryAcquireAs("flood", 10); !errors.Is(err, errs.ErrResourceExhausted) {
			t.Fatalf("the flood holding %d of 10 requests was admitted: %v", flood-1, err)
		}
	}
	honest := 0
	for b.TryAcquireAs("honest", 10) == nil {
		honest++
	}
	if honest != 5 {
		t.Fatalf("honest got %d requests beside the flood, want its share of 5", honest)
	}
	for range flood {
		b.ReleaseAs("flood", 10)
	}
	for range honest {
		b.ReleaseAs("honest", 10)
	}
	wantPending(t, b, 0, 0)

	slots := writer.NewBacklog(10, 1<<20)
	for slots.TryAcquireAs("flood", 1) == nil {
	}
	slots.ReleaseAs("flood", 1)
	if err := slots.TryAcquireAs("honest", 1); err != nil {
		t.Fatalf("honest refused a free slot: %v", err)
	}
	if err := slots.TryAcquireAs("flood", 1); !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("the flood, over its share of slots, was admitted: %v", err)
	}
}
