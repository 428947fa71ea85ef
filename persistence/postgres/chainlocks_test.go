package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence"
)

// idOnChain returns an id starting with prefix whose entries go on chain
// ch of a trail of n chains.
func idOnChain(prefix string, ch, n int) string {
	for i := 0; ; i++ {
		id := prefix + strconv.Itoa(i)
		if persistence.AuditChainOf(id, n) == ch {
			return id
		}
	}
}

// auditedWrites is one member's batch of the audited write kinds a
// cluster runs, all on chain ch of a trail of persistence.MaxAuditChains:
// a session create, a state change of the session existing (created
// before, not audited) and a plan record, each of a key of its own.
func auditedWrites(ch int, existing string) []persistence.Command {
	n := persistence.MaxAuditChains
	plan := idOnChain(fmt.Sprintf("plan-%d-", ch), ch, n)
	return []persistence.Command{
		&persistence.CreateSession{Session: newSession(idOnChain(fmt.Sprintf("new-%d-", ch), ch, n)),
			Audit: []*auditv1.AuditEntry{entry("session_created")}},
		&persistence.AppendMessages{SessionID: existing, UpdatedAt: time.Now(), Turns: []persistence.Turn{{
			State: &sessionv1.StateDelta{SetJson: map[string]string{"step": strconv.Itoa(ch)}}}}},
		&persistence.PlanWrite{PlanID: plan, Records: []*planv1.ErrorRecord{planRecord(plan, 0)},
			Audit: []*auditv1.AuditEntry{entry("plan_error_recorded")}},
	}
}

// lockObject is one row of pg_locks of a backend: the object and how it
// is held.
type lockObject struct {
	object, mode string
	granted      bool
}

// locksOf reads backend pid's heavyweight locks (row locks show only
// while someone waits for one: a wait is caught by the caller's check of
// wait_event_type).
func locksOf(t *testing.T, pid uint32) []lockObject {
	t.Helper()
	rows, err := server.admin.Query(context.Background(), `SELECT concat_ws('/', locktype, database, relation::regclass,
		page, tuple, virtualxid, transactionid, classid, objid, objsubid), mode, granted FROM pg_locks WHERE pid = $1`, pid)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []lockObject
	for rows.Next() {
		var l lockObject
		if err := rows.Scan(&l.object, &l.mode, &l.granted); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sharedModes never conflict with one another: two writers' inserts and
// updates into one table hold these on it and do not wait.
var sharedModes = map[string]bool{"AccessShareLock": true, "RowShareLock": true, "RowExclusiveLock": true}

// commonLocks are the lock objects both a and b hold or wait for, leaving
// out tables both hold in modes that do not conflict.
func commonLocks(a, b []lockObject) []string {
	var out []string
	for _, x := range a {
		for _, y := range b {
			if x.object == y.object && !(sharedModes[x.mode] && sharedModes[y.mode]) {
				out = append(out, fmt.Sprintf("%s (%s granted=%v / %s granted=%v)", x.object, x.mode, x.granted, y.mode, y.granted))
			}
		}
	}
	return out
}

// awaitNoLockWait waits until reached is closed (the Apply of backend pid
// is ready to commit), failing the test if that backend waits for a lock
// meanwhile, or if its Apply ends first.
func awaitNoLockWait(t *testing.T, pid uint32, reached chan struct{}, done chan applied) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-reached:
			return
		case got := <-done:
			t.Fatalf("the Apply ended before its commit: %v %+v", got.err, got.res)
		case <-ctx.Done():
			t.Fatalf("backend %d never reached its commit", pid)
		case <-tick.C:
		}
		var event string
		err := server.admin.QueryRow(ctx, `SELECT coalesce(wait_event, '') FROM pg_stat_activity
			WHERE pid = $1 AND wait_event_type = 'Lock'`, pid).Scan(&event)
		if err == nil {
			t.Fatalf("backend %d waits for a lock (%s): %v", pid, event, locksOf(t, pid))
		}
	}
}

// Two members' writers with the audited write kinds a cluster runs
// (session creates, state changes, plan records) on sessions and plans of
// different chains hold no common lock: with the trail partitioned, both
// transactions reach COMMIT at once, neither waits, and pg_locks shows no
// lock object in both. With one chain (audit_chains=1, the single trail)
// the same batches take turns: the second waits for the first's chain
// lock, and pg_locks shows it, which is what this test would catch if the
// partition stopped separating them.
func TestAuditedWritersOnDifferentChainsShareNoLock(t *testing.T) {
	const chainA, chainB = 3, 11
	setup := func(t *testing.T, chains string) (a, b *node, batchA, batchB []persistence.Command) {
		dsn := withParam(freshDSN(t), "audit_chains", chains)
		a, b = newNode(t, dsn), newNode(t, dsn)
		n := persistence.MaxAuditChains
		sa, sb := idOnChain("old-a-", chainA, n), idOnChain("old-b-", chainB, n)
		a.ok(&persistence.CreateSession{Session: newSession(sa)})
		b.ok(&persistence.CreateSession{Session: newSession(sb)})
		return a, b, auditedWrites(chainA, sa), auditedWrites(chainB, sb)
	}
	succeeded := func(t *testing.T, name string, got applied) {
		t.Helper()
		if got.err != nil {
			t.Fatalf("writer %s: %v", name, got.err)
		}
		for i, r := range got.res {
			if r.Err != nil {
				t.Fatalf("writer %s, command %d: %v", name, i, r.Err)
			}
		}
	}

	t.Run("partitioned", func(t *testing.T) {
		a, b, batchA, batchB := setup(t, strconv.Itoa(persistence.MaxAuditChains))
		reachedA, releaseA := holdCommit(t, a)
		reachedB, releaseB := holdCommit(t, b)
		doneA := applyAsync(a, batchA...)
		awaitNoLockWait(t, a.pid, reachedA, doneA)
		doneB := applyAsync(b, batchB...)
		awaitNoLockWait(t, b.pid, reachedB, doneB)
		// Both are open, every statement run, every lock taken.
		if common := commonLocks(locksOf(t, a.pid), locksOf(t, b.pid)); len(common) > 0 {
			t.Fatalf("writers on chains %d and %d share locks: %v", chainA, chainB, common)
		}
		releaseB()
		succeeded(t, "b", <-doneB)
		releaseA()
		succeeded(t, "a", <-doneA)
	})

	t.Run("one chain takes turns", func(t *testing.T) {
		a, b, batchA, batchB := setup(t, "1")
		reachedA, releaseA := holdCommit(t, a)
		doneA := applyAsync(a, batchA...)
		awaitNoLockWait(t, a.pid, reachedA, doneA)
		doneB := applyAsync(b, batchB...)
		waitLockWait(t, b.pid, doneB)
		common := commonLocks(locksOf(t, a.pid), locksOf(t, b.pid))
		// Chain 0's lock: (class, 0) as the two-key advisory lock it is.
		want := fmt.Sprintf("/%d/0/2 (", auditLockClass)
		found := false
		for _, c := range common {
			found = found || strings.HasPrefix(c, "advisory/") && strings.Contains(c, want)
		}
		if !found {
			t.Fatalf("one chain: the second writer waits, but not on the chain's advisory lock: %v", common)
		}
		releaseA()
		succeeded(t, "a", <-doneA)
		succeeded(t, "b", <-doneB)
	})
}

// A writer whose entries may go anywhere waits only when every chain is
// busy, and then for the one it tried first; once that is free it commits
// there.
func TestOwnChainWaitsOnlyWhenEveryChainIsBusy(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, withParam(freshDSN(t), "audit_chains", strconv.Itoa(persistence.MaxAuditChains)))
	conn, err := server.admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	hold := func(chains string) {
		t.Helper()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1::int4, c) FROM generate_series(0, $2::int4 - 1) AS c `+chains,
			auditLockClass, persistence.MaxAuditChains); err != nil {
			t.Fatal(err)
		}
	}
	free := func() {
		t.Helper()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
			t.Fatal(err)
		}
	}
	prefer := n.store.ownChain
	// Every chain but one busy: the writer takes that one without waiting.
	hold(fmt.Sprintf("WHERE c <> %d", (prefer+5)%persistence.MaxAuditChains))
	n.ok(&persistence.CreateSession{Session: newSession("s-free"), Audit: []*auditv1.AuditEntry{entry("session_created")}})
	if got := n.store.ownChain; got != (prefer+5)%persistence.MaxAuditChains {
		t.Fatalf("writer took chain %d, want the only free one, %d", got, (prefer+5)%persistence.MaxAuditChains)
	}
	free()
	// Every chain busy: it waits for the one it tries first.
	prefer = (prefer + 9) % persistence.MaxAuditChains
	n.store.ownChain = prefer
	hold("")
	done := applyAsync(n, &persistence.CreateSession{Session: newSession("s-wait"), Audit: []*auditv1.AuditEntry{entry("session_created")}})
	waitLockWait(t, n.pid, done)
	free()
	if got := <-done; got.err != nil || got.res[0].Err != nil {
		t.Fatalf("create after the wait: %v %+v", got.err, got.res)
	}
	if n.store.ownChain != prefer {
		t.Fatalf("writer took chain %d after waiting, want %d", n.store.ownChain, prefer)
	}
	heads, err := n.store.Reader().(persistence.ChainReader).AuditChainHeads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	used := 0
	for _, h := range heads {
		if h.TailHash != "" {
			used++
		}
	}
	if used != 2 {
		t.Fatalf("entries on %d chains, want 2 (the free one, then the awaited one)", used)
	}
}
