package postgres

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// twoChainKeys returns two session ids on different chains of a trail of
// MaxAuditChains.
func twoChainKeys() (a, b string) {
	a = "session-a"
	for i := 0; ; i++ {
		b = "session-b" + strconv.Itoa(i)
		if persistence.AuditChainOf(b, persistence.MaxAuditChains) != persistence.AuditChainOf(a, persistence.MaxAuditChains) {
			return a, b
		}
	}
}

func recordFor(session string) persistence.Command {
	return &persistence.RecordAudit{Entries: []*auditv1.AuditEntry{{EventId: ids.New(), EventType: "resource_modified",
		SessionId: session, CreatedAt: timestamppb.Now()}}}
}

// held runs cmd on s in a transaction that stays open, after its command,
// until finish is called; pid reports the writer's backend pid once the
// command has run; finish returns the outcome. A failing test still ends
// the transaction (cleanup), so the Store can close.
func held(t *testing.T, s *Store, cmd persistence.Command) (pid chan uint32, finish func() error) {
	pid, done, release := make(chan uint32, 1), make(chan error, 1), make(chan struct{})
	s.afterCommand = func(int) {
		pid <- s.wconn.PgConn().PID()
		<-release
	}
	go func() {
		w, err := s.Writer()
		if err != nil {
			done <- err
			return
		}
		defer w.Release()
		res, err := w.Apply(context.Background(), []persistence.Command{cmd})
		if err == nil {
			err = res[0].Err
		}
		done <- err
	}()
	var once sync.Once
	var outcome error
	finish = func() error {
		once.Do(func() {
			close(release)
			outcome = <-done
		})
		return outcome
	}
	t.Cleanup(func() { _ = finish() })
	return pid, finish
}

func apply(t *testing.T, s *Store, cmds ...persistence.Command) {
	t.Helper()
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	res, err := w.Apply(context.Background(), cmds)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

// Two members' writers with open transactions hold no common lock, even
// when they start from the same chain: the second commits on another
// chain while the first is open, and the first's only audit lock is its
// own chain's.
func TestWritersOnDifferentChainsShareNoLock(t *testing.T) {
	ctx := context.Background()
	first, dsn := openFresh(t, Unshared())
	if err := first.PartitionAudit(ctx, persistence.MaxAuditChains); err != nil {
		t.Fatal(err)
	}
	second := mustOpen(t, dsn, Unshared())
	second.ownChain = first.ownChain
	a, b := twoChainKeys()
	pids, finish := held(t, first, recordFor(a))
	pid := <-pids
	// Commits while first's transaction is open: no lock of first's is
	// one it needs.
	apply(t, second, recordFor(b))
	rows, err := server.admin.Query(ctx, `SELECT locktype, coalesce(classid::int8, 0), coalesce(objid::int8, 0), coalesce(relation::regclass::text, '')
		FROM pg_locks WHERE pid = $1 AND granted AND locktype IN ('advisory', 'tuple', 'transactionid') OR
		pid = $1 AND locktype = 'relation' AND mode NOT IN ('AccessShareLock', 'RowExclusiveLock')`, pid)
	if err != nil {
		t.Fatal(err)
	}
	var chains []int64
	for rows.Next() {
		var kind, rel string
		var class, obj int64
		if err := rows.Scan(&kind, &class, &obj, &rel); err != nil {
			t.Fatal(err)
		}
		switch {
		case kind == "advisory" && class == int64(auditLockClass):
			chains = append(chains, obj)
		case kind == "advisory" && class == int64(checkpointLockClass):
			// A due checkpoint's lock: only ever tried, so no writer
			// waits on it (TestCheckpointLockIsNeverWaitedFor).
		case kind == "advisory" && class == int64(usageShardLockClass):
			// The writer's own shard of the totals of stored bytes: only
			// ever tried (pickShard).
		case kind == "transactionid":
		default:
			t.Errorf("first writer holds %s lock %d/%d %s", kind, class, obj, rel)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Its own chain, the one it tried first.
	want := []int64{int64(first.ownChain)}
	if !slices.Equal(chains, want) {
		t.Fatalf("first writer holds audit chain locks %v, want %v", chains, want)
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
}

// The change feed misses nothing and repeats nothing across chains: while
// a transaction on one chain is open, AuditBounds stays below its
// entries, even after a later transaction on another chain commits past
// them; once it commits, reading on from the same position yields it.
func TestFeedAcrossChainsIsExactlyOnce(t *testing.T) {
	ctx := context.Background()
	first, dsn := openFresh(t, Unshared())
	if err := first.PartitionAudit(ctx, persistence.MaxAuditChains); err != nil {
		t.Fatal(err)
	}
	second := mustOpen(t, dsn, Unshared())
	a, b := twoChainKeys()
	apply(t, second, recordFor(a), recordFor(b))
	r := second.Reader()
	seen := map[string]int{}
	var after int64
	read := func() {
		t.Helper()
		_, head, err := r.AuditBounds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		es, err := r.FeedAudit(ctx, nil, after, head, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			seen[e.EventId]++
		}
		// A head may be lower than an earlier one (a writer that took a
		// chain since holds its tail down), never with anything unsettled
		// below the earlier one: a cursor keeps the higher, as the feed
		// hub does.
		after = max(after, head)
	}
	read()
	held1 := recordFor(a)
	pids, finish := held(t, first, held1)
	<-pids // its entry is assigned, its transaction open
	later := recordFor(b)
	apply(t, second, later, recordFor(b))
	read()
	heldEntry := held1.(*persistence.RecordAudit).Entries[0]
	if after >= heldEntry.Position {
		t.Fatalf("head %d reached the open transaction's entry at %d", after, heldEntry.Position)
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	read()
	all, err := r.ScanAudit(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 {
		t.Fatalf("%d entries stored, want 5", len(all))
	}
	for _, e := range all {
		if seen[e.EventId] != 1 {
			t.Errorf("entry %s at %d read %d times by the feed, want once", e.EventId, e.Position, seen[e.EventId])
		}
	}
}

// The DSN's audit_chains parameter partitions the trail at Open; a bad
// value is refused and opens nothing.
func TestOpenPartitionsByDSN(t *testing.T) {
	dsn := freshDSN(t)
	s := mustOpen(t, withParam(dsn, "audit_chains", "16"), Unshared())
	heads, err := s.Reader().(persistence.ChainReader).AuditChainHeads(context.Background())
	if err != nil || len(heads) != persistence.MaxAuditChains {
		t.Fatalf("%d chain heads (%v), want %d", len(heads), err, persistence.MaxAuditChains)
	}
	if _, err := Open(context.Background(), withParam(dsn, "audit_chains", "17"), Unshared()); err == nil {
		t.Fatal("audit_chains=17 opened")
	}
}
