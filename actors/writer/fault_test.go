package writer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/audit/audittest"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// latch is closed by the first of many callers.
type latch struct {
	once sync.Once
	c    chan struct{}
}

func newLatch() *latch { return &latch{c: make(chan struct{})} }
func (l *latch) trip() { l.once.Do(func() { close(l.c) }) }
func (l *latch) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-l.c:
	case <-time.After(2 * time.Minute): // a failure guard, not synchronization
		t.Fatalf("gave up waiting for %s", what)
	}
}

// TestDiskFullMidLoad fills the database (PRAGMA max_page_count pinned at
// its current size) while 8 goroutines record, half sync and half async.
// The sync callers whose transaction hit the limit get RESOURCE_EXHAUSTED
// and their entries are not stored; every entry answered durable, and
// every async entry accepted, is stored exactly once once the limit is
// raised; and writes resume.
func TestDiskFullMidLoad(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	obs := &audittest.Observer{}
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{Observer: obs})
	ctx := context.Background()

	const senders, warmup, after = 8, 400, 400
	var (
		durable, asyncOK   [senders][]string
		failedSync         [senders]int
		committed, resumed atomic.Int64
		raised             atomic.Bool
		warm, full, back   = newLatch(), newLatch(), newLatch()
		stop               = make(chan struct{})
		wg                 sync.WaitGroup
		errc               = make(chan error, senders)
	)
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sync := i%2 == 1
				resp, err := svc.Record(ctx, &auditv1.RecordRequest{EventType: audit.EventResourceModified,
					DetailsJson: fmt.Sprintf(`{"s":%d,"i":%d,"pad":"%0200d"}`, s, i, i), Sync: sync})
				switch {
				case err == nil && !sync:
					asyncOK[s] = append(asyncOK[s], resp.Entry.EventId)
				case err == nil:
					durable[s] = append(durable[s], resp.Entry.EventId)
					if committed.Add(1) >= warmup {
						warm.trip()
					}
					if raised.Load() && resumed.Add(1) >= after {
						back.trip()
					}
				case sync && errors.Is(err, errs.ErrResourceExhausted):
					failedSync[s]++
					full.trip()
				default:
					errc <- fmt.Errorf("sender %d record %d (sync=%v): %w", s, i, sync, err)
					return
				}
			}
		}()
	}

	warm.wait(t, "warm-up commits")
	pages, err := st.PageCount()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetMaxPageCount(pages); err != nil {
		t.Fatal(err)
	}
	full.wait(t, "a sync record to fail on the full database")
	if err := st.SetMaxPageCount(1 << 30); err != nil {
		t.Fatal(err)
	}
	raised.Store(true)
	back.wait(t, "writes to resume after the limit was raised")
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if _, err := svc.Flush(ctx, &auditv1.FlushRequest{}); err != nil {
		t.Fatalf("flush after the fault: %v", err)
	}

	seen := map[string]int{}
	for _, e := range audittest.ListAll(t, svc, nil) {
		seen[e.EventId]++
	}
	nDurable, nAsync, nFailed := 0, 0, 0
	for s := range senders {
		for _, id := range durable[s] {
			nDurable++
			if seen[id] != 1 {
				t.Fatalf("entry answered durable %s stored %d times", id, seen[id])
			}
		}
		for _, id := range asyncOK[s] {
			nAsync++
			if seen[id] != 1 {
				t.Fatalf("accepted async entry %s stored %d times", id, seen[id])
			}
		}
		nFailed += failedSync[s]
	}
	// Nothing else is stored: the failed sync records left no trace.
	if len(seen) != nDurable+nAsync {
		t.Fatalf("%d entries stored, want %d durable + %d async (the %d failed ones must be absent)",
			len(seen), nDurable, nAsync, nFailed)
	}
	_, failures, retried, lost := obs.Snapshot()
	t.Logf("%d durable, %d async, %d sync failed; %d transactions rolled back, %d async retried, %d lost",
		nDurable, nAsync, nFailed, failures, retried, lost)
	if failures == 0 || nFailed == 0 || lost != 0 {
		t.Fatalf("failures=%d failed sync=%d lost=%d", failures, nFailed, lost)
	}
	audittest.MustVerify(t, svc)
}

// TestFailedTransactionRetriesAsyncAndFailsSync is the same guarantee made
// deterministic with a writer that fails on demand.
func TestFailedTransactionRetriesAsyncAndFailsSync(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	g := audittest.Gate(st)
	obs := &audittest.Observer{}
	svc := audittest.Start(t, audittest.NewSystem(t), g, writer.Config{Observer: obs, RetryBackoff: time.Millisecond})
	ctx := context.Background()

	g.FailWith(errs.ResourceExhausted("disk full (injected)"))
	async := audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged})
	_, err := svc.Record(ctx, &auditv1.RecordRequest{EventType: audit.EventConfigChanged, Sync: true})
	if !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("sync record in a failing transaction: %v, want RESOURCE_EXHAUSTED", err)
	}
	if _, err := svc.Flush(ctx, &auditv1.FlushRequest{}); !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("flush while the accepted async entry cannot commit: %v", err)
	}
	if _, err := svc.Get(ctx, &auditv1.GetRequest{EventId: async.EventId}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("async entry stored during the fault: %v", err)
	}
	g.FailWith(nil)
	if _, err := svc.Flush(ctx, &auditv1.FlushRequest{}); err != nil {
		t.Fatalf("flush after the fault: %v", err)
	}
	if _, err := svc.Get(ctx, &auditv1.GetRequest{EventId: async.EventId}); err != nil {
		t.Fatalf("accepted async entry lost across the fault: %v", err)
	}
	if n, _ := svc.Count(ctx, &auditv1.CountRequest{}); n.Count != 1 {
		t.Fatalf("%d entries stored, want only the async one", n.Count)
	}
	_, failures, retried, lost := obs.Snapshot()
	if failures < 2 || retried < 2 || lost != 0 {
		t.Fatalf("failures=%d retried=%d lost=%d", failures, retried, lost)
	}
	audittest.MustVerify(t, svc)
}

func TestReadOnlyFileFailsThenRecovers(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{RetryBackoff: time.Millisecond})
	ctx := context.Background()
	if err := st.SetReadOnly(true); err != nil {
		t.Fatal(err)
	}
	_, err := svc.Record(ctx, &auditv1.RecordRequest{EventType: audit.EventConfigChanged, Sync: true})
	if !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("record on a read-only database: %v, want UNAVAILABLE", err)
	}
	if err := st.SetReadOnly(false); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Record(ctx, &auditv1.RecordRequest{EventType: audit.EventConfigChanged, Sync: true}); err != nil {
		t.Fatalf("record after the fault: %v", err)
	}
	if n, _ := svc.Count(ctx, &auditv1.CountRequest{}); n.Count != 1 {
		t.Fatalf("%d entries stored, want 1", n.Count)
	}
}

// TestStopDeadlineDuringAFaultReportsLoss: a drain that cannot finish (the
// database keeps failing) ends at Stop's deadline, and Stop says how many
// accepted async entries were not stored rather than pretending.
func TestStopDeadlineDuringAFaultReportsLoss(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	g := audittest.Gate(st)
	obs := &audittest.Observer{}
	svc, err := audittest.StartErr(audittest.NewSystem(t), g, writer.Config{Observer: obs, Logger: audittest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	g.FailWith(errs.Unavailable("disk gone (injected)"))
	for range 3 {
		audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = svc.Writer().Stop(ctx)
	if !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("stop: %v, want UNAVAILABLE reporting the loss", err)
	}
	if _, _, _, lost := obs.Snapshot(); lost != 3 {
		t.Fatalf("lost = %d, want 3", lost)
	}
	if err2 := svc.Writer().Stop(context.Background()); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("second stop: %v, want the first outcome %v", err2, err)
	}
	if n, _ := st.Reader().CountAudit(context.Background(), nil); n != 0 {
		t.Fatalf("%d entries stored through a failing writer", n)
	}
}
