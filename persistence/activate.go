package persistence

import (
	"fmt"

	"github.com/agentstate/agentstate/messages/errs"
)

// ActivateDialect is what ApplyActivate needs of a store: its statements
// and driver calls, run inside the transaction (and savepoint) of the
// Activate command. It decides nothing: the flow, the staleness check of
// a folded write and a blind append's sequence are ApplyActivate's, the
// same for every store.
type ActivateDialect interface {
	// TakeEpoch increments the key's epoch (1 when it was never
	// activated) and returns it, so that once the command commits no
	// write of an older epoch can (the store's fencing). fresh says the
	// folded write creates the key's session, whose key was, mostly,
	// never activated: a store may take epoch 1 more cheaply then.
	TakeEpoch(kind OwnerKind, id string, fresh bool) (int64, error)
	// ReadMark reads what a SessionMark compares: whether the session
	// exists, its next sequence and its updated_at (nanoseconds, as
	// stored).
	ReadMark(id string) (exists bool, next, updatedAt int64, err error)
	// ReadHead reads the session a blind append goes to: nil when it is
	// missing or not active (staged or closed).
	ReadHead(id string) (*SessionHead, error)
}

// ApplyActivate applies c (see Activate) through the store's dialect d,
// and its folded write, if any, through h, the store's Handler for the
// same transaction. It is every store's Handler.Activate.
//
// Invariant: the folded write is applied only after the epoch was taken
// in the same command, so no write of an older activation can commit
// after it; and only when the session still stands as the owner's load
// saw it (Loaded), or, for a blind append, decided on the session as the
// store reads it after the epoch was taken. Any failure fails the whole
// command, the epoch with it.
func ApplyActivate(c *Activate, d ActivateDialect, h Handler) (Result, error) {
	if c.Kind != OwnerSession && c.Kind != OwnerPlan {
		return Result{}, errs.InvalidArgument("activate: unknown owner kind %d", c.Kind)
	}
	if c.ID == "" {
		return Result{}, errs.InvalidArgument("activate: no %s id", c.Kind)
	}
	f, _ := c.Then.(foldable)
	fresh := f != nil && f.createsSession()
	epoch, err := d.TakeEpoch(c.Kind, c.ID, fresh)
	if err != nil {
		return Result{}, err
	}
	if c.Then == nil {
		return Result{Epoch: epoch}, nil
	}
	if c.Kind != OwnerSession {
		return Result{}, errs.InvalidArgument("activate: only a session's first write can be folded into its activation")
	}
	then, err := WithEpoch(c.Then, c.Kind, c.ID, epoch)
	if err != nil {
		return Result{}, err
	}
	if err := stillLoaded(c, d); err != nil {
		return Result{}, err
	}
	var head *SessionHead
	if app, blind := then.(decided); blind && c.Loaded == nil {
		if head, err = d.ReadHead(c.ID); err != nil {
			return Result{}, err
		}
		if head == nil {
			return Result{}, fmt.Errorf("%w: session %s", ErrBlindRefused, c.ID)
		}
		app.DecideSequence(*head)
	}
	// Dispatch, not the store's own command path: its epoch check would
	// read back the epoch this command just took.
	res, err := Dispatch(h, then)
	res.Epoch, res.Head = epoch, head
	return res, err
}

// decided is a write numbered from its session's head (AppendMessages):
// folded without a load, it is a blind write, decided on the head the store
// reads once the epoch is taken.
type decided interface {
	DecideSequence(head SessionHead)
}

// stillLoaded fails with ErrLoadedChanged unless the session stands as
// c.Loaded says (no load: nothing to compare).
func stillLoaded(c *Activate, d ActivateDialect) error {
	m := c.Loaded
	if m == nil {
		return nil
	}
	exists, next, at, err := d.ReadMark(c.ID)
	if err != nil {
		return err
	}
	same, err := m.Matches(exists, next, at)
	if err != nil {
		return Of("session", c.ID, err)
	}
	if !same {
		return fmt.Errorf("%w: session %s", ErrLoadedChanged, c.ID)
	}
	return nil
}

// String names the kind, for messages.
func (k OwnerKind) String() string {
	switch k {
	case OwnerSession:
		return "session"
	case OwnerPlan:
		return "plan"
	}
	return fmt.Sprintf("owner kind %d", int32(k))
}
