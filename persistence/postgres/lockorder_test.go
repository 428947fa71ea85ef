package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestBatchOwnersSortedAndUnique(t *testing.T) {
	s, p := persistence.OwnerSession, persistence.OwnerPlan
	got := batchOwners([]persistence.Command{
		&persistence.UpdateSession{Epoch: 3, SessionID: "b"},
		&persistence.PlanWrite{Epoch: 1, PlanID: "a"},
		&persistence.Activate{Kind: s, ID: "c"},
		&persistence.AppendMessages{Epoch: 3, SessionID: "b"},
		&persistence.CreateSession{Session: newSession("a")}, // unfenced: may insert its row
		&persistence.DeleteSession{Epoch: 2, SessionID: "B"},
		&persistence.Activate{Kind: 9, ID: "x"},                  // invalid kind
		&persistence.UpdateSession{Epoch: 1, SessionID: ""},      // no id
		&persistence.UpdateSession{Epoch: 1, SessionID: "n\x00"}, // the server rejects it
		&persistence.UpdateSession{Epoch: 1, SessionID: "\xff"},
		&persistence.CreateSession{},
		&persistence.RecordAudit{},
	})
	wantAll := []ownerKey{{s, "B"}, {s, "a"}, {s, "b"}, {s, "c"}, {p, "a"}}
	wantCreate := []ownerKey{{s, "a"}, {s, "c"}}
	if !slices.Equal(got.all, wantAll) || !slices.Equal(got.create, wantCreate) {
		t.Fatalf("batchOwners: all %v create %v; want all %v create %v", got.all, got.create, wantAll, wantCreate)
	}
}

// lockBarrier makes two nodes' first commands overlap if they can: after
// its first command, each node waits until the other node has run its
// first command too, or until the other node's backend waits for a lock
// (then this node holds what the other needs, and goes on).
type lockBarrier struct {
	t      *testing.T
	done   [2]chan struct{}
	waited [2]bool
}

func newLockBarrier(t *testing.T, nodes [2]*node) *lockBarrier {
	lb := &lockBarrier{t: t, done: [2]chan struct{}{make(chan struct{}), make(chan struct{})}}
	for i, n := range nodes {
		other := nodes[1-i]
		var once sync.Once
		n.store.afterCommand = func(cmd int) {
			if cmd != 0 {
				return
			}
			once.Do(func() {
				close(lb.done[i])
				lb.waited[i] = lb.await(lb.done[1-i], other.pid)
			})
		}
	}
	return lb
}

// await returns false when theirs is closed, true when backend pid waits
// for a lock; it fails the test after 20 s.
func (lb *lockBarrier) await(theirs chan struct{}, pid uint32) bool {
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		var waiting bool
		if err := server.admin.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE pid = $1 AND wait_event_type = 'Lock')`, pid).Scan(&waiting); err != nil {
			lb.t.Errorf("pg_stat_activity: %v", err)
			return false
		}
		if waiting {
			return true
		}
		select {
		case <-theirs:
			return false
		case <-tick.C:
		}
	}
	lb.t.Errorf("neither node went on")
	return false
}

func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == codeDeadlock
}

// epochOf reads a key's epoch (0 when it has no row).
func epochOf(t *testing.T, n *node, kind persistence.OwnerKind, id string) int64 {
	t.Helper()
	var e int64
	err := n.store.pool.QueryRow(context.Background(), `SELECT epoch FROM owner_epochs WHERE kind = $1 AND id = $2`,
		int16(kind), id).Scan(&e)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("read epoch: %v", err)
	}
	return e
}

// Two nodes whose batches touch the same keys in opposite orders, with
// their first commands made to overlap. Without the up-front owner locks
// (unordered, the writer before them) each case deadlocks: the server
// aborts one batch with SQLSTATE 40P01 after deadlock_timeout, and Apply
// runs it again, so nothing is lost and nothing applied twice. With them,
// the second batch waits for the first before its first command: no
// deadlock, no second attempt, the same outcome.
func TestOppositeOrdersDoNotDeadlock(t *testing.T) {
	type setup struct {
		a, b  []persistence.Command
		check func(t *testing.T, a, b applied)
	}
	cases := []struct {
		name string
		make func(t *testing.T, a *node) setup
	}{
		{"session updates", func(t *testing.T, a *node) setup {
			// The cluster's "UPDATE sessions" deadlock: two batches update
			// the same sessions in opposite orders.
			x, y := ids.New(), ids.New()
			a.ok(&persistence.CreateSession{Session: newSession(x)})
			a.ok(&persistence.CreateSession{Session: newSession(y)})
			update := func(id string) persistence.Command {
				return &persistence.UpdateSession{SessionID: id, TokenDelta: &sessionv1.TokenUsage{InputTokens: 1}}
			}
			return setup{
				a: []persistence.Command{update(x), update(y)},
				b: []persistence.Command{update(y), update(x)},
				check: func(t *testing.T, ra, rb applied) {
					for _, got := range []applied{ra, rb} {
						if got.err != nil || got.res[0].Err != nil || got.res[1].Err != nil {
							t.Fatalf("%v %+v", got.err, got.res)
						}
					}
					for _, id := range []string{x, y} {
						s, err := a.store.Reader().GetSession(context.Background(), id)
						if err != nil || s.TokenUsage.InputTokens != 2 {
							t.Fatalf("session %s after both updates: %v %v, want 2 input tokens", id, s, err)
						}
					}
				},
			}
		}},
		{"fence and activation", func(t *testing.T, a *node) setup {
			// The cluster's owner_epochs deadlock: during a failover each
			// node writes one key as its owner (epoch 1, a share lock) and
			// activates the key the other writes.
			x, y := ids.New(), ids.New()
			for _, id := range []string{x, y} {
				a.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: id})
				a.ok(&persistence.CreateSession{Epoch: 1, Session: newSession(id)})
			}
			write := func(id string) persistence.Command {
				return &persistence.AppendMessages{Epoch: 1, SessionID: id,
					Turns: []persistence.Turn{{Messages: []*sessionv1.Message{message("m")}}}}
			}
			activate := func(id string) persistence.Command {
				return &persistence.Activate{Kind: persistence.OwnerSession, ID: id}
			}
			return setup{
				a: []persistence.Command{write(x), activate(y)},
				b: []persistence.Command{write(y), activate(x)},
				check: func(t *testing.T, ra, rb applied) {
					// Whichever committed first wrote its key; the other's
					// write then met the first's activation and was fenced.
					if ra.err != nil || rb.err != nil {
						t.Fatalf("a: %v, b: %v", ra.err, rb.err)
					}
					fenced := 0
					for _, got := range []applied{ra, rb} {
						switch {
						case errors.Is(got.res[0].Err, persistence.ErrFenced):
							fenced++
						case got.res[0].Err != nil:
							t.Fatalf("write: %v", got.res[0].Err)
						}
						if got.res[1].Err != nil || got.res[1].Epoch != 2 {
							t.Fatalf("activation: %+v", got.res[1])
						}
					}
					if fenced != 1 {
						t.Fatalf("%d writes fenced, want exactly 1: %+v %+v", fenced, ra.res, rb.res)
					}
					stored := int64(0)
					for _, id := range []string{x, y} {
						s, err := a.store.Reader().GetSession(context.Background(), id)
						if err != nil {
							t.Fatal(err)
						}
						stored += s.MessageCount
						if e := epochOf(t, a, persistence.OwnerSession, id); e != 2 {
							t.Fatalf("session %s at epoch %d, want 2", id, e)
						}
					}
					if stored != 1 {
						t.Fatalf("%d messages stored, want 1", stored)
					}
				},
			}
		}},
	}
	for _, c := range cases {
		for _, ordered := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ordered=%v", c.name, ordered), func(t *testing.T) {
				a, b := twoNodes(t)
				s := c.make(t, a)
				a.store.unordered, b.store.unordered = !ordered, !ordered
				lb := newLockBarrier(t, [2]*node{a, b})
				da, db := applyAsync(a, s.a...), applyAsync(b, s.b...)
				ra, rb := <-da, <-db
				s.check(t, ra, rb)
				retries := a.store.retries + b.store.retries
				if !ordered {
					if retries == 0 || !(isDeadlock(a.store.retried) || isDeadlock(b.store.retried)) {
						t.Fatalf("without the lock order: %d attempts run again (%v, %v), want a deadlock (40P01)",
							retries, a.store.retried, b.store.retried)
					}
					return
				}
				if retries != 0 {
					t.Fatalf("with the lock order, %d attempts were run again: %v %v", retries, a.store.retried, b.store.retried)
				}
				if !lb.waited[0] && !lb.waited[1] {
					t.Fatalf("the batches did not contend: neither node's backend waited for the other")
				}
			})
		}
	}
}

// Two nodes applying batches over the same keys in random orders, mixing
// session updates, fenced appends and plan activations: with the lock
// order no transaction is ever aborted for a deadlock, and every change is
// applied exactly once.
func TestRandomOrdersNeverDeadlock(t *testing.T) {
	t.Run("one chain", func(t *testing.T) { randomOrdersNeverDeadlock(t, twoNodes) })
	t.Run("16 chains", func(t *testing.T) { randomOrdersNeverDeadlock(t, twoChainedNodes) })
}

func randomOrdersNeverDeadlock(t *testing.T, open func(*testing.T) (*node, *node)) {
	a, b := open(t)
	const keys, rounds = 6, 15
	sessions, plans := make([]string, keys), make([]string, keys)
	for i := range sessions {
		sessions[i], plans[i] = ids.New(), ids.New()
		a.ok(&persistence.CreateSession{Session: newSession(sessions[i])})
	}
	var wg sync.WaitGroup
	for i, n := range []*node{a, b} {
		rng := rand.New(rand.NewPCG(uint64(i), 8))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				var batch []persistence.Command
				for _, k := range rng.Perm(2 * keys) {
					if k < keys {
						batch = append(batch, &persistence.UpdateSession{SessionID: sessions[k],
							TokenDelta: &sessionv1.TokenUsage{InputTokens: 1}})
					} else {
						batch = append(batch, &persistence.Activate{Kind: persistence.OwnerPlan, ID: plans[k-keys]})
					}
				}
				if r%3 == 0 {
					// Some batches also take the chain lock.
					batch = append(batch, &persistence.RecordAudit{Entries: []*auditv1.AuditEntry{entry("a")}})
				}
				res, err := n.w.Apply(context.Background(), batch)
				if err != nil {
					t.Errorf("node %d round %d: %v", i, r, err)
					return
				}
				for j, r := range res {
					if r.Err != nil {
						t.Errorf("node %d command %d: %v", i, j, r.Err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if a.store.retries+b.store.retries != 0 {
		t.Fatalf("%d attempts run again (last: %v, %v)", a.store.retries+b.store.retries, a.store.retried, b.store.retried)
	}
	for i := range sessions {
		s, err := a.store.Reader().GetSession(context.Background(), sessions[i])
		if err != nil || s.TokenUsage.InputTokens != 2*rounds {
			t.Fatalf("session %s: %v %v, want %d input tokens", sessions[i], s, err, 2*rounds)
		}
		if e := epochOf(t, a, persistence.OwnerPlan, plans[i]); e != 2*rounds {
			t.Fatalf("plan %s at epoch %d, want %d", plans[i], e, 2*rounds)
		}
	}
	verifyChain(t, a.store.Reader())
}

// A deadlock that keeps happening (here every attempt is aborted with
// 40P01) is run again up to maxAttempts; then the batch fails UNAVAILABLE
// (retryable: nothing stored), with its audit entries unassigned, and the
// writer goes on.
func TestDeadlockEveryAttemptIsUnavailable(t *testing.T) {
	a, _ := twoNodes(t)
	sid := ids.New()
	a.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: sid})
	a.ok(&persistence.CreateSession{Epoch: 1, Session: newSession(sid)})
	attempts := 0
	a.store.commit = func(ctx context.Context, tx pgx.Tx) error {
		attempts++
		if err := tx.Rollback(ctx); err != nil {
			return err
		}
		return &pgconn.PgError{Severity: "ERROR", Code: codeDeadlock, Message: "deadlock detected"}
	}
	e := entry("message_appended")
	_, err := a.w.Apply(context.Background(), []persistence.Command{
		&persistence.AppendMessages{Epoch: 1, SessionID: sid, Turns: []persistence.Turn{{
			Messages: []*sessionv1.Message{message("x")}, Audit: []*auditv1.AuditEntry{e}}}},
		&persistence.Activate{Kind: persistence.OwnerPlan, ID: "p"},
	})
	if errs.CodeOf(err) != errs.UnavailableCode || attempts != maxAttempts {
		t.Fatalf("Apply: %v after %d attempts; want UNAVAILABLE after %d", err, attempts, maxAttempts)
	}
	if e.Position != 0 {
		t.Fatalf("a failed batch's audit entry kept position %d", e.Position)
	}
	if s, err := a.store.Reader().GetSession(context.Background(), sid); err != nil || s.MessageCount != 0 {
		t.Fatalf("session after the failed batch: %v %v", s, err)
	}
	if ep := epochOf(t, a, persistence.OwnerPlan, "p"); ep != 0 {
		t.Fatalf("the failed activation left epoch %d", ep)
	}
	a.store.commit = func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }
	a.ok(&persistence.AppendMessages{Epoch: 1, SessionID: sid, Turns: []persistence.Turn{{Messages: []*sessionv1.Message{message("y")}}}})
	if n := len(verifyChain(t, a.store.Reader())); n != 0 {
		t.Fatalf("%d audit entries stored, want 0", n)
	}
}

// An owner id the server rejects (NUL) fails its own command, not the
// batch: the up-front owner locks leave it out.
func TestRejectedOwnerIDFailsItsCommandAlone(t *testing.T) {
	a, _ := twoNodes(t)
	res := a.apply(&persistence.Activate{Kind: persistence.OwnerSession, ID: "bad\x00id"},
		&persistence.Activate{Kind: persistence.OwnerSession, ID: "good"})
	if errs.CodeOf(res[0].Err) != errs.InvalidArgumentCode || res[1].Err != nil || res[1].Epoch != 1 {
		t.Fatalf("results %v, %+v; want INVALID_ARGUMENT and epoch 1", res[0].Err, res[1])
	}
}
