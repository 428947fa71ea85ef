package persistence

import (
	"time"

	"github.com/agentstate/agentstate/messages/errs"
)

// Fencing keeps "one owner per session or plan" true even where the actor
// runtime cannot (a cluster that activated the same grain on two members).
//
// An owner starts by applying Activate for its key: the store atomically
// increments the key's epoch and returns it. Every later write of that owner
// carries the epoch (the Epoch fields of the commands below); the store
// applies a write only while its epoch is the key's current one and fails it
// with ErrFenced otherwise. So when two activations exist, the older one's
// writes fail from the moment the newer one activated, and the two can never
// both write.
//
// Epoch 0 on a command means "unfenced": accepted only while the key has never
// been activated (an import writing a brand-new session, a tool). A command
// with Epoch > 0 for a key that was never activated is ErrFenced too.

// OwnerKind names what an epoch belongs to.
type OwnerKind int32

const (
	OwnerSession OwnerKind = 1
	OwnerPlan    OwnerKind = 2
)

// Activate takes a new epoch for one session or plan; Result.Epoch is the
// new epoch (1 on the first activation). It never fails on its own except
// for an invalid Kind or empty ID (INVALID_ARGUMENT).
//
// Then folds the owner's first write into its activation (issue 17: a cold
// session's append took an activation, a load and a write, three trips
// where a warm one takes one): the store applies Then, with its Epoch set
// to the new epoch (WithEpoch), in the same command right after taking the
// epoch, so the two commit or fail together, and answers Then's Result
// with Epoch set. Then is a session's CreateSession or AppendMessages for
// ID. Its owner decided it against a load made before this activation
// (Loaded) or against no load at all (a create: the store refuses it when
// the session exists). Loaded is what that load saw; unless the session
// still stands as loaded once the epoch is taken, the command fails with
// ErrLoadedChanged and nothing of it is stored. Once the epoch is taken,
// no write of an older activation can commit, so a session that still
// stands as loaded is what a load after the activation would have read.
//
// A blind append (Then an AppendMessages, Loaded nil: issue 17's W4, where
// nearly every append activates a cold session and its load cost a fifth of
// the CPU) was decided with no load at all: the store reads the session
// inside the command, on the writer's connection, and the append is decided
// on what it read (AppendMessages.DecideSequence: Then's NextSequence and
// State are the stored ones, the command's own are ignored). The session must
// exist and be active; otherwise the command fails with ErrBlindRefused and
// nothing of it is stored. Result.Head is what the store read, before Then
// was applied, so the owner learns its next sequence and state from the
// commit.
//
// Every store applies an Activate through ApplyActivate (activate.go),
// giving it only its statements (ActivateDialect).
type Activate struct {
	Kind   OwnerKind
	ID     string
	Then   Command
	Loaded *SessionMark
}

// SessionMark is what an owner's load saw of its session, to tell whether
// anything was written since: every write of a session's owner moves its
// next sequence or its updated_at (to the time of the write's decision).
// Exists false: the session was missing.
type SessionMark struct {
	Exists       bool
	NextSequence int64
	UpdatedAt    time.Time
}

// Matches reports whether a session that exists (exists), with next and
// updatedAt (nanoseconds, as stored), stands as m says.
func (m *SessionMark) Matches(exists bool, next, updatedAt int64) (bool, error) {
	if exists != m.Exists {
		return false, nil
	}
	if !exists {
		return true, nil
	}
	at, err := StoredTimeNanos("updated_at", m.UpdatedAt)
	if err != nil {
		return false, err
	}
	return next == m.NextSequence && updatedAt == at, nil
}

// SessionHead is where a session's next append starts, what
// AppendMessages.DecideSequence decides on: as a warm owner holds it, or as
// the store read it for a blind append (Activate: the session as it stood
// before the append, reported in Result.Head).
type SessionHead struct {
	NextSequence int64
	// State is the session's state (a JSON object).
	State     string
	UpdatedAt time.Time
}

// ScanHead reads a session head from one row of (next_sequence,
// state_json, updated_at in Unix nanoseconds), as a store's ReadHead
// selects it; a missing row (noRow true of scan's error) is a nil head:
// the session is missing or not active.
func ScanHead(scan func(dest ...any) error, noRow func(error) bool) (*SessionHead, error) {
	var h SessionHead
	var at int64
	err := scan(&h.NextSequence, &h.State, &at)
	if noRow(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h.UpdatedAt = time.Unix(0, at).UTC()
	return &h, nil
}

// ErrBlindRefused is a command-level failure (FAILED_PRECONDITION) of an
// Activate carrying a blind append: the session is missing, staged or
// closed, which only a load can tell the owner how to answer. Nothing was
// stored; the owner activates alone, loads and decides again.
var ErrBlindRefused = errs.FailedPrecondition("the session cannot take an append decided without a load (missing, staged or closed)")

// ErrLoadedChanged is a command-level failure (FAILED_PRECONDITION) of an
// Activate with Then: the session was written after the owner's load
// (Activate.Loaded). Nothing was stored; the owner activates alone and
// loads again. Match it with errors.Is.
var ErrLoadedChanged = errs.FailedPrecondition("the session was written after its owner loaded it")

// foldable is a write Activate.Then may carry: a session owner's first
// write (CreateSession, AppendMessages).
type foldable interface {
	Command
	// withEpoch returns a copy of the write carrying epoch.
	withEpoch(epoch int64) Command
	// createsSession reports whether the write creates its session.
	createsSession() bool
}

func (c *CreateSession) withEpoch(epoch int64) Command {
	cp := *c
	cp.Epoch = epoch
	return &cp
}

func (c *AppendMessages) withEpoch(epoch int64) Command {
	cp := *c
	cp.Epoch = epoch
	return &cp
}

func (c *CreateSession) createsSession() bool  { return true }
func (c *AppendMessages) createsSession() bool { return false }

// WithEpoch returns a copy of cmd, a write Activate.Then may carry, with
// its Epoch set to epoch; INVALID_ARGUMENT for any other command or one
// for another key than (kind, id).
func WithEpoch(cmd Command, kind OwnerKind, id string, epoch int64) (Command, error) {
	f, ok := cmd.(foldable)
	if !ok {
		return nil, errs.InvalidArgument("activate: %T cannot be folded into an activation", cmd)
	}
	out := f.withEpoch(epoch)
	if f := out.Fence(); f.Kind != kind || f.ID != id {
		return nil, errs.InvalidArgument("activate: the folded write is not %s's", id)
	}
	return out, nil
}

func (c *Activate) Size() int {
	if c.Then != nil {
		return rowOverhead + c.Then.Size()
	}
	return rowOverhead
}
