package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence"
)

// Fencing (persistence.Activate): the owners table holds the current epoch
// of every session and plan that was ever activated.
//
// Invariant: a fenced command is applied only when the epoch it carries is
// its key's row in owners (no row counts as epoch 0). The check is the
// command's first statement, inside its transaction (and savepoint) — or,
// for appends pooled in an attempt without savepoints, a condition of the
// pooled UPDATE that advances their sessions (advance.go), where any miss
// abandons the whole attempt; for a plan write, a condition of its first
// statement, the plan-row upsert (plans.go) — and
// the writer holds the database's write lock from BEGIN IMMEDIATE to
// COMMIT; so no Activate can commit between the check and the write, and
// once an Activate committed, every later write of an older epoch fails.
// Even a second process writing the same file cannot interleave.

const (
	// The upsert increments under the write lock, and epochSQL reads the
	// result back in the same transaction, so Activate is atomic. (One
	// statement with RETURNING did both, but SQLite materializes RETURNING
	// rows in an ephemeral table: 120 µs of the writer's CPU per activation
	// in issue 17's W4, where every append activates its session.)
	activateSQL = `INSERT INTO owners (kind, id, epoch) VALUES (?1, ?2, 1)
	ON CONFLICT (kind, id) DO UPDATE SET epoch = epoch + 1`
	epochSQL = `SELECT epoch FROM owners WHERE kind = ?1 AND id = ?2`
	// firstActivateSQL takes epoch 1 for a key that was never activated
	// and leaves any other alone (RowsAffected tells which).
	firstActivateSQL = `INSERT OR IGNORE INTO owners (kind, id, epoch) VALUES (?1, ?2, 1)`
)

// Activate is persistence.ApplyActivate on this store's statements.
func (a *applier) Activate(c *persistence.Activate) (persistence.Result, error) {
	return persistence.ApplyActivate(c, a, a)
}

// TakeEpoch takes the key's next epoch (persistence.ActivateDialect). A
// create folded into its activation (fresh: a new session's id, which no
// owner ever activated) takes epoch 1 in one statement; only when the key
// has a row already (a repeated create) does it fall back to the upsert
// and its read-back, which every other activation — mostly of keys
// activated before — takes at once (issue 17: a statement less per
// create).
func (a *applier) TakeEpoch(kind persistence.OwnerKind, id string, fresh bool) (int64, error) {
	if fresh {
		res, err := a.exec(firstActivateSQL, int64(kind), id)
		if err != nil {
			return 0, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return 1, err
		}
	}
	if _, err := a.exec(activateSQL, int64(kind), id); err != nil {
		return 0, err
	}
	var epoch int64
	err := a.queryRow(epochSQL, int64(kind), id).Scan(&epoch)
	return epoch, err
}

// markSQL reads what a persistence.SessionMark compares.
const markSQL = `SELECT next_sequence, updated_at FROM sessions WHERE session_id = ?`

// ReadMark: see persistence.ActivateDialect.
func (a *applier) ReadMark(id string) (exists bool, next, updatedAt int64, err error) {
	err = a.queryRow(markSQL, id).Scan(&next, &updatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return false, 0, 0, nil
	}
	return err == nil, next, updatedAt, err
}

// headSQL reads what a blind append is decided on (persistence.Activate).
// On the writer's connection, whose page cache no other connection's
// commit invalidates, and next to the row the append then updates: the
// read-only pool's load of the same session re-read its pages after every
// commit (issue 17's W4).
const headSQL = `SELECT next_sequence, state_json, updated_at FROM sessions WHERE session_id = ? AND state = ?`

// ReadHead reads the session a blind append goes to, inside the command
// that just took its epoch: no older owner can write it any more, so what
// it reads is what a load after the activation would see.
func (a *applier) ReadHead(id string) (*persistence.SessionHead, error) {
	return persistence.ScanHead(func(dest ...any) error {
		return a.queryRow(headSQL, id, int64(sessionv1.SessionState_SESSION_STATE_ACTIVE)).Scan(dest...)
	}, func(err error) bool { return errors.Is(err, sql.ErrNoRows) })
}

// checkEpoch fails a fenced command whose epoch is not its key's current
// one with persistence.ErrFenced (wrapped, with the detail). Unfenced
// commands (audit records, prunes, activations) pass.
func (a *applier) checkEpoch(cmd persistence.Command) error {
	if cmd == nil {
		return nil // Dispatch refuses it
	}
	f := cmd.Fence()
	if f.Kind == 0 {
		return nil
	}
	kind, id, epoch := f.Kind, f.ID, f.Epoch
	var current int64
	err := a.queryRow(epochSQL, int64(kind), id).Scan(&current)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if epoch == current {
		return nil
	}
	return fencedError(kind, id, epoch, current)
}

// fencedError wraps persistence.ErrFenced, so that errors.Is matches it and
// errs.CodeOf gives FAILED_PRECONDITION, and says which epochs disagreed.
func fencedError(kind persistence.OwnerKind, id string, carried, current int64) error {
	if current == 0 {
		return fmt.Errorf("%w: %s %s: the write carries epoch %d, but it was never activated", persistence.ErrFenced, kind, id, carried)
	}
	return fmt.Errorf("%w: %s %s: the write carries epoch %d, the current epoch is %d", persistence.ErrFenced, kind, id, carried, current)
}
