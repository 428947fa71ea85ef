package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
)

// A writer whose connection is cut, or whose COMMIT answer is lost,
// runs its transaction again or looks up its outcome (commit.go).

// terminate ends backend pid and waits until it is gone.
func terminate(t *testing.T, pid uint32) {
	t.Helper()
	var ok bool
	if err := server.admin.QueryRow(context.Background(), "SELECT pg_terminate_backend($1, 10000)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v %v", pid, ok, err)
	}
}

// A writer whose connection was cut between transactions (a server
// restart, an idle timeout) reconnects, and the Apply that found it cut
// succeeds.
func TestWriterReconnectsAfterItsConnectionIsCut(t *testing.T) {
	a, _ := twoNodes(t)
	first := entry("a")
	a.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{first}})
	terminate(t, a.pid)
	e := entry("b")
	a.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{e}})
	if e.Position != 2 || e.PrevHash != first.Hash {
		t.Fatalf("after reconnecting: position %d", e.Position)
	}
	if a.store.connects != 2 {
		t.Fatalf("%d writer connections, want 2", a.store.connects)
	}
	verifyChain(t, a.store.Reader())
}

// A connection cut just before COMMIT: the transaction rolled back, so the
// Apply runs it again on a new connection, and the lost attempt left
// nothing behind (its activation took no epoch, its entries no positions).
func TestConnectionCutBeforeCommitRunsAgain(t *testing.T) {
	a, _ := twoNodes(t)
	a.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: "k"})
	var once sync.Once
	attempts := 0
	a.store.commit = func(ctx context.Context, tx pgx.Tx) error {
		attempts++
		once.Do(func() { terminate(t, tx.Conn().PgConn().PID()) })
		return tx.Commit(ctx)
	}
	e := entry("a")
	res := a.apply(&persistence.Activate{Kind: persistence.OwnerSession, ID: "k"}, &persistence.RecordAudit{Entries: []*auditv1.AuditEntry{e}})
	if attempts != 2 || res[0].Epoch != 2 || e.Position != 1 {
		t.Fatalf("%d attempts, epoch %d, position %d; want 2 attempts, epoch 2 (the lost attempt took none), position 1",
			attempts, res[0].Epoch, e.Position)
	}
	if n := len(verifyChain(t, a.store.Reader())); n != 1 {
		t.Fatalf("%d entries stored, want 1", n)
	}
}

// COMMIT succeeded but its answer was lost: the outcome is looked up, and
// Apply reports the commit instead of a failure (which would make callers
// retry what is stored).
func TestLostCommitAnswerIsLookedUp(t *testing.T) {
	a, _ := twoNodes(t)
	attempts := 0
	a.store.commit = func(ctx context.Context, tx pgx.Tx) error {
		attempts++
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		tx.Conn().Close(ctx)
		return fmt.Errorf("read COMMIT's answer: %w", errors.New("unexpected EOF"))
	}
	sid := ids.New()
	e := entry("session_created")
	res := a.apply(&persistence.CreateSession{Session: newSession(sid), Audit: []*auditv1.AuditEntry{e}})
	if res[0].Err != nil || attempts != 1 || e.Position != 1 {
		t.Fatalf("result %v, %d attempts, position %d; want success in 1 attempt at position 1", res[0].Err, attempts, e.Position)
	}
	if _, err := a.store.Reader().GetSession(context.Background(), sid); err != nil {
		t.Fatalf("the session is not stored: %v", err)
	}
	if a.store.connects != 2 {
		t.Fatalf("%d writer connections, want 2 (one to look the outcome up)", a.store.connects)
	}
	a.store.commit = func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }
	next := entry("b")
	a.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{next}})
	if next.Position != 2 || next.PrevHash != e.Hash {
		t.Fatalf("next entry at %d", next.Position)
	}
}

// PostgreSQL text cannot hold NUL: such a value fails its own command with
// INVALID_ARGUMENT, and the rest of the batch commits.
