package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/storetest"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// node is one Store with its writer, as one agentstate process has.
type node struct {
	t     *testing.T
	store *Store
	w     persistence.Writer
	pid   uint32
}

// twoNodes opens two unshared Stores on one fresh schema whose audit
// trail is one chain (audit_chains=1): positions are dense, so a test sees
// exactly which positions an attempt took.
func twoNodes(t *testing.T) (*node, *node) {
	t.Helper()
	dsn := withParam(freshDSN(t), "audit_chains", "1")
	return newNode(t, dsn), newNode(t, dsn)
}

// twoChainedNodes is twoNodes on the default trail of
// persistence.MaxAuditChains chains.
func twoChainedNodes(t *testing.T) (*node, *node) {
	t.Helper()
	dsn := freshDSN(t)
	return newNode(t, dsn), newNode(t, dsn)
}

func newNode(t *testing.T, dsn string) *node {
	t.Helper()
	s := mustOpen(t, dsn, Unshared())
	w, err := s.Writer()
	if err != nil {
		t.Fatalf("Writer: %v", err)
	}
	t.Cleanup(w.Release)
	return &node{t: t, store: s, w: w, pid: s.wconn.PgConn().PID()}
}

// apply applies cmds and fails the test on a transaction-level error.
func (n *node) apply(cmds ...persistence.Command) []persistence.Result {
	n.t.Helper()
	res, err := n.w.Apply(context.Background(), cmds)
	if err != nil {
		n.t.Fatalf("Apply: %v", err)
	}
	return res
}

// ok applies one command and fails the test unless it committed.
func (n *node) ok(cmd persistence.Command) persistence.Result {
	n.t.Helper()
	res := n.apply(cmd)[0]
	if res.Err != nil {
		n.t.Fatalf("%T: %v", cmd, res.Err)
	}
	return res
}

func entry(eventType string) *auditv1.AuditEntry {
	return &auditv1.AuditEntry{EventId: ids.New(), EventType: eventType, DetailsJson: `{}`, CreatedAt: timestamppb.Now()}
}

func newSession(id string) *sessionv1.Session {
	now := timestamppb.Now()
	return &sessionv1.Session{SessionId: id, ActorName: "a", Namespace: "n", CreatedAt: now, UpdatedAt: now}
}

func message(content string) *sessionv1.Message {
	return &sessionv1.Message{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER, Content: content, CreatedAt: timestamppb.Now()}
}

// verifyChain reads the whole chain through r and checks it: positions
// 1..n without gaps, each entry chaining on the one before.
func verifyChain(t *testing.T, r persistence.Reader) []*auditv1.AuditEntry {
	t.Helper()
	return storetest.VerifyChains(t, r)
}

// Two nodes writing audit entries at the same time keep their chains:
// every entry chains on the one committed before it on its chain,
// whichever node wrote it; on one chain as on 16.
func TestTwoWritersKeepOneChain(t *testing.T) {
	t.Run("one chain", func(t *testing.T) { twoWritersKeepTheirChains(t, twoNodes) })
	t.Run("16 chains", func(t *testing.T) { twoWritersKeepTheirChains(t, twoChainedNodes) })
}

func twoWritersKeepTheirChains(t *testing.T, open func(*testing.T) (*node, *node)) {
	a, b := open(t)
	const rounds = 40
	written := make([][]*auditv1.AuditEntry, 2)
	var wg sync.WaitGroup
	for i, n := range []*node{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				es := []*auditv1.AuditEntry{entry("a"), entry("b"), entry("session_created")}
				res, err := n.w.Apply(context.Background(), []persistence.Command{
					&persistence.RecordAudit{Entries: es[:2]},
					&persistence.CreateSession{Session: newSession(ids.New()), Audit: es[2:]},
				})
				if err != nil || res[0].Err != nil || res[1].Err != nil {
					t.Errorf("node %d round %d: %v %v", i, r, err, res)
					return
				}
				written[i] = append(written[i], es...)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	stored := verifyChain(t, a.store.Reader())
	if len(stored) != 2*rounds*3 {
		t.Fatalf("%d entries stored, want %d", len(stored), 2*rounds*3)
	}
	byPos := map[int64]*auditv1.AuditEntry{}
	for _, e := range stored {
		byPos[e.Position] = e
	}
	// What each writer was told matches what is stored.
	for i, es := range written {
		for _, e := range es {
			s := byPos[e.Position]
			if s == nil || s.EventId != e.EventId || s.Hash != e.Hash || s.PrevHash != e.PrevHash {
				t.Fatalf("node %d: entry %s was told position %d, stored there: %v", i, e.EventId, e.Position, s)
			}
		}
	}
}

// waitLockWait waits until backend pid, which runs the Apply that
// reports to done, waits for a lock. It fails the test if that Apply
// finishes first: it did not wait.
func waitLockWait(t *testing.T, pid uint32, done chan applied) {
	t.Helper()
	if got, waited := lockWaitOrDone(t, pid, done); !waited {
		t.Fatalf("the Apply finished without waiting for a lock: %v %+v", got.err, got.res)
	}
}

// lockWaitOrDone waits until backend pid, which runs the Apply that
// reports to done, waits for a lock (waited), or that Apply finishes
// (got).
func lockWaitOrDone(t *testing.T, pid uint32, done chan applied) (got applied, waited bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		err := server.admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE pid = $1 AND wait_event_type = 'Lock')`, pid).Scan(&waited)
		if err != nil {
			t.Fatalf("pg_stat_activity: %v", err)
		}
		if waited {
			return applied{}, true
		}
		select {
		case got := <-done:
			return got, false
		case <-ctx.Done():
			t.Fatalf("backend %d neither waited for a lock nor finished", pid)
		case <-tick.C:
		}
	}
}

// holdCommit makes n's next COMMIT wait: reached is closed when the
// transaction is ready to commit (all its locks taken), and the commit goes
// ahead when release is called (at the latest when t ends, so that a failed
// test does not leave the writer stuck).
func holdCommit(t *testing.T, n *node) (reached chan struct{}, release func()) {
	reached, released := make(chan struct{}), make(chan struct{})
	var hold, free sync.Once
	release = func() { free.Do(func() { close(released) }) }
	t.Cleanup(release)
	n.store.commit = func(ctx context.Context, tx pgx.Tx) error {
		hold.Do(func() {
			close(reached)
			<-released
		})
		return tx.Commit(ctx)
	}
	return reached, release
}

type applied struct {
	res []persistence.Result
	err error
}

func applyAsync(n *node, cmds ...persistence.Command) chan applied {
	done := make(chan applied, 1)
	go func() {
		res, err := n.w.Apply(context.Background(), cmds)
		done <- applied{res, err}
	}()
	return done
}

// Fencing between two nodes: an Activate on one node waits for a write of
// the older epoch that is in flight on the other, and fences every later
// one; a write of the older epoch that arrives while an Activate is in
// flight waits for it and is fenced.
func TestFencingAcrossWriters(t *testing.T) {
	a, b := twoNodes(t)
	sid := ids.New()
	if e := a.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: sid}).Epoch; e != 1 {
		t.Fatalf("first activation: epoch %d", e)
	}
	a.ok(&persistence.CreateSession{Epoch: 1, Session: newSession(sid)})
	if e := b.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: sid}).Epoch; e != 2 {
		t.Fatalf("activation on node b: epoch %d", e)
	}
	res := a.apply(&persistence.AppendMessages{Epoch: 1, SessionID: sid, Turns: []persistence.Turn{{Messages: []*sessionv1.Message{message("stale")}}}})
	if !errors.Is(res[0].Err, persistence.ErrFenced) {
		t.Fatalf("node a's stale append: %v, want ErrFenced", res[0].Err)
	}
	b.ok(&persistence.AppendMessages{Epoch: 2, SessionID: sid, Turns: []persistence.Turn{{Messages: []*sessionv1.Message{message("current")}}}})

	t.Run("activation waits for an in-flight write", func(t *testing.T) {
		a.ok(&persistence.Activate{Kind: persistence.OwnerPlan, ID: "p"})
		reached, release := holdCommit(t, a)
		write := applyAsync(a, &persistence.PlanWrite{Epoch: 1, PlanID: "p", Records: []*planv1.ErrorRecord{
			{RecordId: ids.New(), PlanId: "p", Sequence: 0, RecordedAt: timestamppb.Now()}}})
		<-reached
		activate := applyAsync(b, &persistence.Activate{Kind: persistence.OwnerPlan, ID: "p"})
		waitLockWait(t, b.pid, activate)
		release()
		if got := <-write; got.err != nil || got.res[0].Err != nil {
			t.Fatalf("in-flight write: %v %v", got.err, got.res)
		}
		if got := <-activate; got.err != nil || got.res[0].Epoch != 2 {
			t.Fatalf("activation: %v %+v", got.err, got.res)
		}
		res := a.apply(&persistence.PlanWrite{Epoch: 1, PlanID: "p"})
		if !errors.Is(res[0].Err, persistence.ErrFenced) {
			t.Fatalf("write after the activation: %v, want ErrFenced", res[0].Err)
		}
		if p, err := b.store.Reader().GetPlan(context.Background(), "", "p"); err != nil || p.NextSequence != 1 {
			t.Fatalf("plan: %+v %v", p, err)
		}
	})

	t.Run("a write waits for an in-flight activation and is fenced", func(t *testing.T) {
		for _, epoch := range []int64{1, 0} {
			// Epoch 1: a's owner is stale once b activates again. Epoch 0:
			// an unfenced write of a key whose first activation is in
			// flight.
			id := ids.New()
			if epoch == 1 {
				a.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: id})
			}
			reached, release := holdCommit(t, b)
			activate := applyAsync(b, &persistence.Activate{Kind: persistence.OwnerSession, ID: id})
			<-reached
			e := entry("session_created")
			write := applyAsync(a, &persistence.CreateSession{Epoch: epoch, Session: newSession(id), Audit: []*auditv1.AuditEntry{e}})
			waitLockWait(t, a.pid, write)
			release()
			if got := <-activate; got.err != nil || got.res[0].Err != nil {
				t.Fatalf("activation: %v %+v", got.err, got.res)
			}
			got := <-write
			if got.err != nil || !errors.Is(got.res[0].Err, persistence.ErrFenced) {
				t.Fatalf("epoch %d write that waited for an activation: %v %+v, want ErrFenced", epoch, got.err, got.res)
			}
			if e.Position != 0 {
				t.Fatalf("a fenced write's audit entry was assigned position %d", e.Position)
			}
			if _, err := a.store.Reader().GetSession(context.Background(), id); err == nil {
				t.Fatalf("a fenced create stored its session")
			}
		}
	})
	verifyChain(t, a.store.Reader())
}

func TestRejectedValueFailsItsCommandAlone(t *testing.T) {
	a, _ := twoNodes(t)
	sid := ids.New()
	a.ok(&persistence.CreateSession{Session: newSession(sid)})
	e := entry("a")
	res := a.apply(
		&persistence.AppendMessages{SessionID: sid, Turns: []persistence.Turn{{Messages: []*sessionv1.Message{message("nul \x00 byte")}}}},
		&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{e}},
	)
	if errs.CodeOf(res[0].Err) != errs.InvalidArgumentCode || res[1].Err != nil {
		t.Fatalf("results %v, %v; want INVALID_ARGUMENT and success", res[0].Err, res[1].Err)
	}
	if s, _ := a.store.Reader().GetSession(context.Background(), sid); s.MessageCount != 0 {
		t.Fatalf("message_count %d", s.MessageCount)
	}
	if e.Position != 1 {
		t.Fatalf("entry at %d", e.Position)
	}
}
