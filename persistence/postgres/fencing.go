package postgres

import (
	"errors"
	"fmt"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
)

// Activate is persistence.ApplyActivate on this store's statements.
func (a *applier) Activate(c *persistence.Activate) (persistence.Result, error) {
	return persistence.ApplyActivate(c, a, a)
}

// TakeEpoch takes the key's next epoch (persistence.ActivateDialect). The
// upsert locks the key's row until commit, and it waits for every
// transaction that holds the row FOR SHARE (a write checking an older
// epoch) to finish first: so no write of an older epoch can commit after
// an Activate has, and every one committed before the session row is read
// for a folded write.
func (a *applier) TakeEpoch(kind persistence.OwnerKind, id string, _ bool) (int64, error) {
	var epoch int64
	err := a.queryRow(`INSERT INTO owner_epochs (kind, id, epoch) VALUES ($1, $2, 1)
		ON CONFLICT (kind, id) DO UPDATE SET epoch = owner_epochs.epoch + 1 RETURNING epoch`,
		[]any{int16(kind), id}, &epoch)
	if err == nil && a.epochs != nil {
		a.epochs[ownerKey{kind, id}] = epoch
	}
	return epoch, err
}

// ReadMark: see persistence.ActivateDialect.
func (a *applier) ReadMark(id string) (exists bool, next, updatedAt int64, err error) {
	err = a.queryRow(`SELECT next_sequence, updated_at FROM sessions WHERE session_id = $1`,
		[]any{id}, &next, &updatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, 0, 0, nil
	}
	return err == nil, next, updatedAt, err
}

// ReadHead reads the session a blind append goes to (persistence.Activate),
// inside the command that just took its epoch: the upsert holds the key's
// row, so no older owner's write can commit after this read.
func (a *applier) ReadHead(id string) (*persistence.SessionHead, error) {
	return persistence.ScanHead(func(dest ...any) error {
		return a.queryRow(`SELECT next_sequence, state_json, updated_at FROM sessions WHERE session_id = $1 AND state = $2`,
			[]any{id, int64(sessionv1.SessionState_SESSION_STATE_ACTIVE)}, dest...)
	}, func(err error) bool { return errors.Is(err, pgx.ErrNoRows) })
}

// fence checks that epoch is the key's current epoch (0: that the key was
// never activated) and holds the key's row FOR SHARE until commit, so that
// no Activate of the key can commit between the check and this write.
//
// For epoch 0 the row may not exist, and a missing row cannot be locked;
// so an unfenced write first inserts it with epoch 0 (a concurrent first
// Activate then either waits for this transaction or is waited for). If
// the row was there already, it is locked like any other.
func (a *applier) fence(kind persistence.OwnerKind, id string, epoch int64) error {
	switch {
	case epoch < 0:
		return errs.InvalidArgument("%s: negative epoch %d", ownerName(kind, id), epoch)
	case epoch == 0:
		var e int64
		err := a.queryRow(`INSERT INTO owner_epochs (kind, id, epoch) VALUES ($1, $2, 0)
			ON CONFLICT (kind, id) DO NOTHING RETURNING epoch`, []any{int16(kind), id}, &e)
		if err == nil {
			return nil // a new row: the insert holds it until commit
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	var current int64
	err := a.queryRow(`SELECT epoch FROM owner_epochs WHERE kind = $1 AND id = $2 FOR SHARE`,
		[]any{int16(kind), id}, &current)
	if errors.Is(err, pgx.ErrNoRows) {
		return fencedErr(kind, id, epoch, 0)
	}
	if err != nil {
		return err
	}
	if current != epoch {
		return fencedErr(kind, id, epoch, current)
	}
	return nil
}

// fencedErr is ErrFenced for a write of epoch to a key whose epoch is
// current (0: never activated).
func fencedErr(kind persistence.OwnerKind, id string, epoch, current int64) error {
	if current == 0 {
		return fmt.Errorf("%s: epoch %d, never activated: %w", ownerName(kind, id), epoch, persistence.ErrFenced)
	}
	return fmt.Errorf("%s: epoch %d, current %d: %w", ownerName(kind, id), epoch, current, persistence.ErrFenced)
}

func ownerName(kind persistence.OwnerKind, id string) string {
	if kind == persistence.OwnerPlan {
		return "plan " + id
	}
	return "session " + id
}
