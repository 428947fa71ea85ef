package seeds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/tests/baseline"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Audit stress: auditWriters goroutines record auditPerWriter entries each
// while auditReaders goroutines list, count, get and prune on the same
// store until every accepted entry has been written.
//
// Observed on the baseline (2 busy cores, 2000 entries a run; 24 runs: 11
// with -race, 8 without, 5 with -race and GOMAXPROCS=1): 52–59% of the
// accepted entries lost under -race, 55–66% without, 62–66% with one P; as
// many writer commits failing ("cannot start a
// transaction within a transaction", "cannot commit - no transaction is
// active") and thousands of reader errors (the same, and "Session is
// already flushing") — in every run. The readers loop flat out, so these
// rates show a saturated session, not production odds.
const (
	auditWriters   = 4
	auditPerWriter = 500
	auditReaders   = 4
)

// auditUnderTest is one implementation of the audit service.
type auditUnderTest struct {
	name string
	// record asks for one entry carrying ref; nil means accepted.
	record func(ctx context.Context, ref string, i int) error
	// read runs read operation i: list, count, get or prune, in turn.
	read func(ctx context.Context, i int) error
	// flush returns once every accepted entry has been handed to storage.
	flush func(ctx context.Context) error
	// stored returns the ref of every entry really stored, in order.
	stored func(t *testing.T) []string
	// verify checks the implementation's own integrity claims.
	verify func(t *testing.T, stored int)
	// failures reports errors the implementation only logged.
	failures func() string
	racy     bool
}

// Seed 002 (#7325): one ORM session — one connection, one transaction, one
// pending set — shared by the background writer and every reader.
func TestSeedAuditSharedSession(t *testing.T) {
	impls := []struct {
		name  string
		start func(t *testing.T) auditUnderTest
	}{{"baseline", baselineAudit}, {"agentstate", agentstateAudit}}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			a := impl.start(t)
			accepted, readErrs, lastReadErr := stressAudit(t, a)
			stored := a.stored(t)
			lost, dups, alien := checkExactlyOnce(accepted, stored)
			t.Logf("%s: accepted %d, stored %d: %d lost (%.1f%%), %d duplicated, %d unknown; %d reader errors (last: %v); %s",
				a.name, len(accepted), len(stored), lost, 100*float64(lost)/float64(len(accepted)), dups, alien,
				readErrs, lastReadErr, a.failures())
			if a.racy {
				if lost == 0 {
					t.Errorf("the stress test did not catch seed 002 on the baseline: no accepted entry lost")
				}
				return
			}
			if lost != 0 || dups != 0 || alien != 0 {
				t.Errorf("%d accepted entries lost, %d duplicated, %d unknown; want none", lost, dups, alien)
			}
			if readErrs != 0 {
				t.Errorf("%d reads failed while writes were in flight (last: %v); want none", readErrs, lastReadErr)
			}
			a.verify(t, len(stored))
		})
	}
}

// stressAudit runs the shared driver and returns the refs accepted and the
// readers' error count.
func stressAudit(t *testing.T, a auditUnderTest) (accepted []string, readErrs int64, lastReadErr error) {
	var (
		mu       sync.Mutex
		errMu    sync.Mutex
		nReadErr atomic.Int64
		writing  = make(chan struct{})
		readers  sync.WaitGroup
		writers  sync.WaitGroup
	)
	ctx := bg
	for r := range auditReaders {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := r; ; i++ {
				select {
				case <-writing:
					return
				default:
				}
				if err := a.read(ctx, i); err != nil {
					nReadErr.Add(1)
					errMu.Lock()
					lastReadErr = err
					errMu.Unlock()
				}
			}
		}()
	}
	for w := range auditWriters {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range auditPerWriter {
				ref := fmt.Sprintf("w%d-%d", w, i)
				if err := a.record(ctx, ref, i); err != nil {
					t.Errorf("record %s: %v", ref, err)
					continue
				}
				mu.Lock()
				accepted = append(accepted, ref)
				mu.Unlock()
			}
		}()
	}
	writers.Wait()
	// Readers keep going until the writer has drained its queue.
	if err := a.flush(ctx); err != nil {
		t.Errorf("flush: %v", err)
	}
	close(writing)
	readers.Wait()
	errMu.Lock()
	defer errMu.Unlock()
	return accepted, nReadErr.Load(), lastReadErr
}

func baselineAudit(t *testing.T) auditUnderTest {
	path := filepath.Join(t.TempDir(), "audit.db")
	svc, err := baseline.OpenAuditService(path)
	if err != nil {
		t.Fatal(err)
	}
	var closed sync.Once
	closeSvc := func() {
		closed.Do(func() {
			if err := svc.Close(); err != nil {
				t.Logf("baseline close: %v", err)
			}
		})
	}
	t.Cleanup(closeSvc)
	return auditUnderTest{
		name: "baseline",
		racy: true,
		record: func(_ context.Context, ref string, _ int) error {
			svc.Record("config_changed", ref) // returns the placeholder id -1
			return nil
		},
		read: func(ctx context.Context, i int) error {
			var err error
			switch i % 4 {
			case 0:
				_, err = svc.ListEntries(ctx, 20)
			case 1:
				_, err = svc.Count(ctx)
			case 2:
				_, _, err = svc.GetEntry(ctx, int64(i))
			case 3:
				// A cut-off before every entry: prune deletes nothing, so
				// every loss is the race's.
				_, err = svc.Prune(ctx, time.Unix(0, 0))
			}
			return err
		},
		flush: func(context.Context) error { svc.Flush(); return nil },
		stored: func(t *testing.T) []string {
			closeSvc()
			es, err := baseline.ReadAuditLog(path)
			if err != nil {
				t.Fatal(err)
			}
			refs := make([]string, len(es))
			for i, e := range es {
				refs[i] = e.Details
			}
			return refs
		},
		failures: func() string {
			n, err := svc.WriteFailures()
			return fmt.Sprintf("%d writer commits failed (last: %v)", n, err)
		},
	}
}

func agentstateAudit(t *testing.T) auditUnderTest {
	obs := &writerObserver{}
	n := startNode(t, obs)
	svc := n.audit
	var lastDurable atomic.Pointer[string]
	return auditUnderTest{
		name: "agentstate",
		record: func(ctx context.Context, ref string, i int) error {
			details, _ := json.Marshal(map[string]string{"ref": ref})
			resp, err := svc.Record(ctx, &auditv1.RecordRequest{
				EventType:   "config_changed",
				ActorName:   "seed-002",
				DetailsJson: string(details),
				Sync:        i%2 == 0, // both paths: answered at commit, and at acceptance
			})
			if err == nil && resp.GetDurable() {
				id := resp.GetEntry().GetEventId()
				lastDurable.Store(&id)
			}
			return err
		},
		read: func(ctx context.Context, i int) error {
			var err error
			switch i % 4 {
			case 0:
				_, err = svc.List(ctx, &auditv1.ListRequest{Limit: 20})
			case 1:
				_, err = svc.Count(ctx, &auditv1.CountRequest{})
			case 2:
				if id := lastDurable.Load(); id != nil {
					_, err = svc.Get(ctx, &auditv1.GetRequest{EventId: *id})
				}
			case 3:
				_, err = svc.Prune(ctx, &auditv1.PruneRequest{OlderThan: timestamppb.New(time.Unix(0, 0))})
			}
			return err
		},
		flush: func(ctx context.Context) error {
			_, err := svc.Flush(ctx, &auditv1.FlushRequest{})
			return err
		},
		stored: func(t *testing.T) []string {
			var refs []string
			after := ""
			for {
				resp, err := svc.List(bg, &auditv1.ListRequest{
					Filter:       &auditv1.Filter{EventType: "config_changed"},
					AfterEventId: after,
					Limit:        audit.MaxListLimit,
				})
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range resp.GetEntries() {
					var d struct{ Ref string }
					if err := json.Unmarshal([]byte(e.GetDetailsJson()), &d); err != nil {
						t.Fatalf("entry %s: details %q: %v", e.GetEventId(), e.GetDetailsJson(), err)
					}
					refs = append(refs, d.Ref)
				}
				if after = resp.GetNextCursor(); after == "" {
					return refs
				}
			}
		},
		verify: func(t *testing.T, stored int) {
			v, err := svc.Verify(bg, &auditv1.VerifyRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if !v.GetOk() {
				t.Errorf("Verify: chain broken at %s: %s", v.GetFirstBrokenEventId(), v.GetReason())
			}
			c, err := svc.Count(bg, &auditv1.CountRequest{Filter: &auditv1.Filter{EventType: "config_changed"}})
			if err != nil {
				t.Fatal(err)
			}
			if c.GetCount() != int64(stored) {
				t.Errorf("Count = %d, List found %d", c.GetCount(), stored)
			}
			t.Logf("Verify ok over %d entries", v.GetEntriesChecked())
			if lost, failed := obs.counts(); lost != 0 || failed != 0 {
				t.Errorf("writer reported %d async records lost and %d transactions rolled back; want none", lost, failed)
			}
		},
		failures: func() string {
			lost, failed := obs.counts()
			return fmt.Sprintf("writer: %d async records lost, %d transactions rolled back", lost, failed)
		},
	}
}

// writerObserver counts what the writer reports about failures.
type writerObserver struct {
	mu         sync.Mutex
	asyncLost  int
	rolledBack int
}

func (o *writerObserver) BatchCommitted(_, _ int, _ time.Duration, err error) {
	if err != nil {
		o.mu.Lock()
		o.rolledBack++
		o.mu.Unlock()
	}
}

func (o *writerObserver) AsyncRetried(int, error) {}

func (o *writerObserver) AsyncLost(entries int, _ error) {
	o.mu.Lock()
	o.asyncLost += entries
	o.mu.Unlock()
}

func (o *writerObserver) counts() (asyncLost, rolledBack int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.asyncLost, o.rolledBack
}
