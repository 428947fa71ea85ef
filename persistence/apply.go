package persistence

import (
	"context"
	"errors"

	"github.com/agentstate/agentstate/messages/errs"
)

// The apply protocol, the same for every store. A Writer's Apply runs a
// batch as an optimistic attempt first: no savepoints, rows held for
// multi-row statements or pipelines, because commands rarely fail. If one
// fails on its own, that attempt is abandoned and the batch replayed with a
// savepoint around each command, which isolates the failure: the command
// is rolled back alone (its Result carries the error) and the rest
// commits. Any other failure abandons the transaction: nothing is stored.
// RunCommands is that protocol for one attempt; a store supplies the
// transaction (Attempt), begins and commits it, and decides what to do
// after a failed attempt (SQLite: replay or fail; PostgreSQL: also run
// again after a deadlock or a lost connection).

// Attempt is one transaction of a store, as RunCommands drives it.
type Attempt interface {
	// Command applies one command (through Dispatch). In the optimistic
	// attempt it may hold rows for later statements; in a replay it writes
	// everything of the command before it returns, so that a failure is
	// the command's own.
	Command(Command) (Result, error)
	// Savepoint, RollbackToSavepoint and ReleaseSavepoint bracket a
	// command of a replay.
	Savepoint() error
	RollbackToSavepoint() error
	ReleaseSavepoint() error
	// Mark and Restore are the in-memory side of a savepoint: the audit
	// chain (ChainTail) and anything the attempt holds.
	Mark() ChainMark
	Restore(ChainMark)
	// Finish writes what the attempt still holds, before COMMIT.
	Finish() error
}

// Step is how an attempt ended.
type Step int

const (
	// Commit: every command ran (failed ones, in a replay, with their
	// Result.Err); the store commits the transaction.
	Commit Step = iota
	// Isolate: in the optimistic attempt a command failed on its own; the
	// store abandons the transaction and replays the batch with savepoints.
	Isolate
	// Abandon: the transaction failed (the error says why); nothing of it
	// may be stored.
	Abandon
)

// IsCommandError is the one rule that decides whether a failure belongs to
// one command or to its transaction: a typed refusal (*errs.Error: a
// stale sequence, a taken id, a fenced epoch, a value out of range) is the
// command's, and rolls back that command alone; anything else (an I/O
// error, a lost connection, a full disk, a cancelled context) is the
// transaction's.
func IsCommandError(err error) bool {
	var e *errs.Error
	return errors.As(err, &e)
}

// RunCommands runs batch through a as one attempt, with or without
// savepoints, and says how it ended. after, when set, runs after each
// command (a store's test hook); its failure counts as the command's.
// ctx is checked before each command and before Finish.
func RunCommands(ctx context.Context, a Attempt, batch []Command, savepoints bool, after func(i int) error) ([]Result, Step, error) {
	failed := func(err error) ([]Result, Step, error) {
		if !savepoints && IsCommandError(err) {
			return nil, Isolate, nil
		}
		return nil, Abandon, err
	}
	results := make([]Result, len(batch))
	for i, cmd := range batch {
		if err := ctx.Err(); err != nil {
			return nil, Abandon, err
		}
		var res Result
		var err error
		if savepoints {
			res, err = isolated(a, cmd)
		} else {
			res, err = a.Command(cmd)
		}
		if err != nil {
			return failed(err)
		}
		results[i] = res
		if after != nil {
			if err := after(i); err != nil {
				return failed(err)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, Abandon, err
	}
	if err := a.Finish(); err != nil {
		return failed(err)
	}
	return results, Commit, nil
}

// isolated applies cmd inside a savepoint. A failure of the command's own
// becomes its Result (the savepoint rolled back, the chain restored); only
// a transaction-level failure is returned as an error.
func isolated(a Attempt, cmd Command) (Result, error) {
	if err := a.Savepoint(); err != nil {
		return Result{}, err
	}
	m := a.Mark()
	res, err := a.Command(cmd)
	if err != nil {
		if !IsCommandError(err) {
			return Result{}, err
		}
		if rerr := a.RollbackToSavepoint(); rerr != nil {
			return Result{}, rerr
		}
		a.Restore(m)
		// err itself, not the *errs.Error inside: a wrapped error
		// (ErrFenced) keeps its detail.
		return Result{Err: err}, nil
	}
	if err := a.ReleaseSavepoint(); err != nil {
		return Result{}, err
	}
	return res, nil
}
