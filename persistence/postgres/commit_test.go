package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
)

// COMMIT succeeded, its answer was lost, and the server cannot be reached
// to look the outcome up: Apply answers OUTCOME_UNKNOWN, never UNAVAILABLE
// (which promises that nothing was stored — here everything was).
func TestLostCommitAnswerNotLookedUpIsOutcomeUnknown(t *testing.T) {
	a, _ := twoNodes(t)
	reachable := a.store.wcfg.Copy()
	a.store.commit = func(ctx context.Context, tx pgx.Tx) error {
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		tx.Conn().Close(ctx)
		// The lookup's new connection is refused: nothing listens on port 1.
		a.store.wcfg.Host, a.store.wcfg.Port, a.store.wcfg.Fallbacks = "127.0.0.1", 1, nil
		return fmt.Errorf("read COMMIT's answer: %w", errors.New("unexpected EOF"))
	}
	sid := ids.New()
	_, err := a.w.Apply(context.Background(), []persistence.Command{
		&persistence.CreateSession{Session: newSession(sid), Audit: []*auditv1.AuditEntry{entry("session_created")}},
	})
	if !errors.Is(err, errs.ErrOutcomeUnknown) {
		t.Fatalf("Apply: %v, want OUTCOME_UNKNOWN", err)
	}
	// The "maybe" was a yes: the session is stored.
	if _, err := a.store.Reader().GetSession(context.Background(), sid); err != nil {
		t.Fatalf("the committed session is not readable: %v", err)
	}
	// Once the server is reachable again, the writer reconnects and the
	// chain continues after the committed entry.
	a.store.wcfg = reachable
	a.store.commit = func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }
	next := entry("b")
	a.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{next}})
	if next.Position != 2 {
		t.Fatalf("next entry at position %d, want 2", next.Position)
	}
}
