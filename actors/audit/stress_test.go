package audit_test

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
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestSeedScenario is the scenario of the original service's bug
// (002_95217f223f198ca7.txt: one database session shared by the background
// writer and every reader): 16 goroutines record 10,000 entries each, half
// async and half sync, while 16 others loop list / count / get / prune.
// Afterwards every accepted entry is stored exactly once and the chain
// verifies. The prunes cut before the test started, so they must remove
// nothing the test checks (TestPrune... covers removal).
func TestSeedScenario(t *testing.T) {
	const writers, each, readers = 16, 10000, 16
	// synchronous=normal: this test is about concurrency, not power loss,
	// and an fsync per commit would make 80,000 sync records take minutes
	// on a busy machine (TestRecordSyncIsDurableAndReadable and the
	// writer's fault tests run with FULL).
	st, _ := audittest.OpenFile(t, "?synchronous=normal")
	obs := &audittest.Observer{}
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{Observer: obs})
	began := time.Now()
	ctx := context.Background()

	// lastSync is an entry some writer was answered durable for: every
	// reader must be able to get it and page from it.
	var lastSync atomic.Pointer[auditv1.AuditEntry]
	accepted := make([][]string, writers)
	var wg sync.WaitGroup
	errc := make(chan error, writers+readers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]string, 0, each)
			for i := range each {
				resp, err := svc.Record(ctx, &auditv1.RecordRequest{
					EventType: audit.EventResourceModified, ActorName: fmt.Sprintf("w%02d", w),
					DetailsJson: fmt.Sprintf(`{"i":%d,"password":"p%d"}`, i, i), Sync: i%2 == 1,
				})
				if err != nil {
					errc <- fmt.Errorf("writer %d record %d: %w", w, i, err)
					return
				}
				if resp.Durable != (i%2 == 1) {
					errc <- fmt.Errorf("writer %d record %d: durable=%v", w, i, resp.Durable)
					return
				}
				if resp.Durable {
					lastSync.Store(resp.Entry)
				}
				ids = append(ids, resp.Entry.EventId)
			}
			accepted[w] = ids
		}()
	}
	stop := make(chan struct{})
	var rg sync.WaitGroup
	var reads atomic.Int64
	for r := range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := readOnce(ctx, svc, r+n, began, lastSync.Load()); err != nil {
					errc <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if _, err := svc.Flush(ctx, &auditv1.FlushRequest{}); err != nil {
		t.Fatal(err)
	}

	seen := map[string]int{}
	for _, e := range audittest.ListAll(t, svc, &auditv1.Filter{EventType: audit.EventResourceModified}) {
		seen[e.EventId]++
		if e.DetailsJson[len(e.DetailsJson)-len(`"password":"***"}`):] != `"password":"***"}` {
			t.Fatalf("unmasked details stored: %s", e.DetailsJson)
		}
	}
	total := 0
	for w, ids := range accepted {
		for _, id := range ids {
			total++
			if seen[id] != 1 {
				t.Fatalf("writer %d's entry %s stored %d times, want exactly once", w, id, seen[id])
			}
		}
	}
	if total != writers*each || len(seen) != total {
		t.Fatalf("accepted %d, stored %d distinct, want %d", total, len(seen), writers*each)
	}
	v := audittest.MustVerify(t, svc)
	batches, failures, _, _ := obs.Snapshot()
	t.Logf("%d entries, %d reads, %d transactions (%d failed), chain of %d verified, in %v",
		total, reads.Load(), len(batches), failures, v.EntriesChecked, time.Since(began).Round(time.Millisecond))
	if failures != 0 {
		t.Fatalf("%d transactions rolled back", failures)
	}
}

// readOnce runs one of the readers' operations and checks what it can:
// a durable entry is visible and counted, prunes before the test
// started remove nothing.
func readOnce(ctx context.Context, svc *audit.Service, n int, began time.Time, durable *auditv1.AuditEntry) error {
	switch n % 4 {
	case 0:
		after := ""
		if durable != nil {
			after = durable.EventId
		}
		_, err := svc.List(ctx, &auditv1.ListRequest{AfterEventId: after, Limit: 50,
			Filter: &auditv1.Filter{EventType: audit.EventResourceModified}})
		return err
	case 1:
		// Entries since a durable one: it must be counted. (A count over
		// the whole table on every loop would be most of this test's CPU
		// and starve the writers it is meant to race with.)
		if durable == nil {
			return nil
		}
		c, err := svc.Count(ctx, &auditv1.CountRequest{Filter: &auditv1.Filter{Since: durable.CreatedAt}})
		if err != nil {
			return err
		}
		if c.Count < 1 {
			return fmt.Errorf("count since durable %s = %d, want >= 1", durable.EventId, c.Count)
		}
	case 2:
		if durable == nil {
			return nil
		}
		g, err := svc.Get(ctx, &auditv1.GetRequest{EventId: durable.EventId})
		if err != nil {
			return fmt.Errorf("get durable %s: %w", durable.EventId, err)
		}
		if g.Entry.Hash != durable.Hash {
			return fmt.Errorf("get %s: hash %s, answered %s", durable.EventId, g.Entry.Hash, durable.Hash)
		}
	case 3:
		if n%256 != 3 {
			_, err := svc.Get(ctx, &auditv1.GetRequest{EventId: "01ARZ3NDEKTSV4RRFFQ69G5FAV"})
			if !errors.Is(err, errs.ErrNotFound) {
				return fmt.Errorf("get unknown: %v", err)
			}
			return nil
		}
		p, err := svc.Prune(ctx, &auditv1.PruneRequest{OlderThan: timestamppb.New(began.Add(-time.Hour))})
		if err != nil {
			return err
		}
		if p.Removed != 0 {
			return fmt.Errorf("prune before the test removed %d", p.Removed)
		}
	}
	return nil
}
