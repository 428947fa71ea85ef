package session_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	"github.com/agentstate/agentstate/actors/writer"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// TestLargeAppendsPastTheByteBudgetAreRefused is issue 15's "300
// concurrent 3 MiB appends" in small: while the writer is held, network
// appends are admitted only as long as their bytes fit the backlog's byte
// budget; the rest are refused with RESOURCE_EXHAUSTED at once, though the
// backlog has thousands of free slots. The admitted ones commit once the
// writer goes on.
func TestLargeAppendsPastTheByteBudgetAreRefused(t *testing.T) {
	const (
		budget  = 2 << 20
		content = 512 << 10
		senders = 16
		fit     = 3 // 4 appends of content bytes and their ids exceed budget
	)
	path := fileURL(t)
	n := startNodeWith(t, path, writer.Config{BacklogBytes: budget}, session.Config{}, nil)
	sid := n.create(t, "a")
	backlog := n.wr.Backlog()
	ctx := writer.NoWait(ctxT(t))

	release := holdWrites(t, path)
	big := strings.Repeat("x", content)
	results := make(chan error, senders)
	for range senders {
		go func() {
			_, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: sid,
				Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: big}}})
			results <- err
		}()
	}
	// Every sender is either refused (answered at once) or admitted (held
	// at the writer): wait for the refusals and the admitted ones. A
	// refused TryAcquire holds a slot for an instant before it gives it
	// back, so Pending is read as final only once every refusal came.
	refused := 0
	deadline := time.After(time.Minute)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for refused < senders-fit || backlog.Pending() < fit {
		select {
		case err := <-results:
			if !errors.Is(err, errs.ErrResourceExhausted) {
				t.Fatalf("append while the writer is held: %v, want RESOURCE_EXHAUSTED", err)
			}
			if refused++; refused > senders-fit {
				t.Fatalf("%d refused; want %d refused past a %d-byte budget", refused, senders-fit, budget)
			}
		case <-deadline:
			t.Fatalf("%d refused, %d pending of %d senders", refused, backlog.Pending(), senders)
		case <-tick.C:
		}
	}
	if backlog.Pending() != fit {
		t.Fatalf("refused %d, admitted %d (%d bytes pending); want %d refused past a %d-byte budget",
			refused, backlog.Pending(), backlog.PendingBytes(), senders-fit, budget)
	}
	if b := backlog.PendingBytes(); b > budget || b < fit*content {
		t.Fatalf("%d bytes pending, want %d..%d", b, fit*content, budget)
	}
	release()
	for range fit {
		if err := <-results; err != nil {
			t.Fatalf("admitted append: %v", err)
		}
	}
	if p, b := backlog.Pending(), backlog.PendingBytes(); p != 0 || b != 0 {
		t.Fatalf("after the appends were answered: %d pending, %d bytes", p, b)
	}
}
