package postgres

import (
	"context"
	"errors"

	auditv1 "github.com/agentstate/agentstate/messages/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// maxAttempts bounds how often Apply runs a transaction that the server
// aborted to break a deadlock or a serialization conflict with another
// node's writer.
const maxAttempts = 4

// writer is the Store's sole persistence.Writer. All its state lives on the
// Store, under Store.wmu; released is too.
type writer struct {
	s        *Store
	released bool
}

var _ persistence.Writer = (*writer)(nil)

// Release gives the writer back; a second Release does nothing.
func (w *writer) Release() {
	w.s.wmu.Lock()
	defer w.s.wmu.Unlock()
	if !w.released {
		w.released = true
		w.s.writerHeld = false
	}
}

// Apply runs batch in one READ COMMITTED transaction on the writer
// connection.
//
// A command that fails on its own (its error is an *errs.Error) must be
// rolled back alone. Savepoints do that, but cost two round trips per
// command, and commands rarely fail. So Apply first runs the batch without
// them; if a command fails on its own, it rolls that attempt back and runs
// the batch again with one SAVEPOINT per command. A transaction the server
// aborted for a deadlock or serialization conflict (another node's writer)
// is run again, up to maxAttempts. Any other error aborts: nothing is
// stored, every audit entry of the batch is unassigned again, and the error
// is returned; a writer connection that died is replaced on the next Apply.
//
// ctx bounds the statements before COMMIT (a cancellation there closes the
// connection, and the server rolls the transaction back). COMMIT itself
// runs without ctx's cancellation: when its answer is lost anyway, the
// outcome is looked up by transaction id (see resolveCommit).
func (w *writer) Apply(ctx context.Context, batch []persistence.Command) ([]persistence.Result, error) {
	s := w.s
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if w.released {
		return nil, errs.FailedPrecondition("writer was released")
	}
	if s.closed {
		return nil, errs.Unavailable("store %s is closed", s.key)
	}
	savepoints := false
	for attempt := 1; ; attempt++ {
		results, next, err := s.run(ctx, batch, savepoints)
		switch {
		case next == isolateCommands && !savepoints:
			savepoints = true
			attempt--
			continue
		case next == runAgain && attempt < maxAttempts:
			s.retries++
			continue
		case err != nil:
			return nil, storeErr("apply", err)
		}
		return results, nil
	}
}

// outcome says what Apply does after an attempt that did not commit.
type outcome int

const (
	finished        outcome = iota // committed, or failed for good
	isolateCommands                // a command failed on its own: run again with savepoints
	runAgain                       // nothing was stored and a new attempt may succeed
)

// run makes one attempt at batch. Without savepoints, it stops at the first
// command-level failure, rolls back and reports isolateCommands. With
// savepoints, command-level failures become Results. Called with wmu held.
func (s *Store) run(ctx context.Context, batch []persistence.Command, savepoints bool) (_ []persistence.Result, _ outcome, err error) {
	if err := ctx.Err(); err != nil {
		return nil, finished, err
	}
	if len(batch) == 0 {
		return []persistence.Result{}, finished, nil
	}
	conn, err := s.liveConn(ctx)
	if err != nil {
		return nil, finished, err
	}
	// Before COMMIT, a failure means the transaction did not commit: the
	// server aborted it (a deadlock: try again), or the connection was lost
	// (a server restart, an idle connection cut: try again on a new one,
	// unless the caller gave up, which closes the connection too).
	failed := func(err error) (outcome, error) {
		switch {
		case ctx.Err() != nil:
			return finished, err
		case retryable(err), conn.IsClosed():
			return runAgain, err
		}
		return finished, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		s.afterFailure()
		next, err := failed(err)
		return nil, next, err
	}
	a := &applier{ctx: ctx, tx: tx, buffered: !savepoints}
	abort := func(err error) ([]persistence.Result, outcome, error) {
		a.restore(mark{})
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
		next, err := failed(err)
		s.afterFailure()
		return nil, next, err
	}
	if err := a.begin(needsChain(batch)); err != nil {
		return abort(err)
	}
	results := make([]persistence.Result, len(batch))
	for i, cmd := range batch {
		if err := ctx.Err(); err != nil {
			return abort(err)
		}
		var res persistence.Result
		if savepoints {
			res, err = a.command(cmd)
		} else {
			res, err = a.dispatch(cmd)
			if isCommandErr(err) {
				abort(err)
				return nil, isolateCommands, nil
			}
		}
		if err != nil {
			return abort(err)
		}
		results[i] = res
		if s.afterCommand != nil {
			s.afterCommand(i)
		}
	}
	if err := ctx.Err(); err != nil {
		return abort(err)
	}
	if err := a.finish(); err != nil {
		if isCommandErr(err) && !savepoints {
			abort(err)
			return nil, isolateCommands, nil
		}
		return abort(err)
	}
	if next, err := s.commitTx(ctx, conn, tx, a.xid); err != nil {
		a.restore(mark{})
		s.afterFailure()
		return nil, next, err
	}
	return results, finished, nil
}

// afterFailure forgets a writer connection that died, so that the next
// Apply reconnects. Called with wmu held.
func (s *Store) afterFailure() {
	if s.wconn != nil && s.wconn.IsClosed() {
		s.dropConn()
	}
}

func isCommandErr(err error) bool {
	var cmdErr *errs.Error
	return errors.As(err, &cmdErr)
}

// needsChain reports whether batch may write audit entries, and so must
// lock the chain's tail first. Taking that lock first, before any row lock,
// keeps the writers of all nodes from deadlocking on it.
func needsChain(batch []persistence.Command) bool {
	for _, cmd := range batch {
		switch c := cmd.(type) {
		case *persistence.CreateSession:
			if len(c.Audit) > 0 {
				return true
			}
		case *persistence.AppendMessages:
			for _, t := range c.Turns {
				if len(t.Audit) > 0 {
					return true
				}
			}
		case *persistence.UpdateSession:
			if len(c.Audit) > 0 {
				return true
			}
		case *persistence.DeleteSession:
			if len(c.Audit) > 0 {
				return true
			}
		case *persistence.PlanWrite:
			if len(c.Audit) > 0 {
				return true
			}
		case *persistence.RecordAudit:
			if len(c.Entries) > 0 {
				return true
			}
		case *persistence.Activate, nil:
		default: // PruneAudit, and anything new: lock to be safe
			return true
		}
	}
	return false
}

// applier carries one transaction. pos and hash are the chain's tail
// including every entry inserted so far in the transaction; assigned lists
// those entries, so a rollback can unassign them.
type applier struct {
	ctx context.Context
	tx  pgx.Tx
	// xid is the transaction's id, to look up its outcome if COMMIT's
	// answer is lost.
	xid string
	// chain: the tail row is locked; startPos is the tail as loaded.
	chain    bool
	startPos int64
	pos      int64
	hash     string
	assigned []*auditv1.AuditEntry
	// buffered: audit rows wait in pending for one multi-row insert at the
	// end; only without savepoints, where a failure aborts the attempt
	// anyway.
	buffered bool
	pending  []*auditv1.AuditEntry
}

// begin takes the transaction's id and, when the batch writes audit
// entries, the lock on the chain's tail, in one round trip.
func (a *applier) begin(chain bool) error {
	if !chain {
		return a.tx.QueryRow(a.ctx, "SELECT pg_current_xact_id()::text").Scan(&a.xid)
	}
	a.chain = true
	err := a.tx.QueryRow(a.ctx, `SELECT pg_current_xact_id()::text, tail_position, tail_hash
		FROM audit_chain WHERE id = 1 FOR UPDATE`).Scan(&a.xid, &a.pos, &a.hash)
	a.startPos = a.pos
	return err
}

// finish writes the queued audit rows and moves the chain's tail.
func (a *applier) finish() error {
	if err := a.flushAudit(); err != nil {
		return err
	}
	if !a.chain || a.pos == a.startPos {
		return nil
	}
	_, err := a.tx.Exec(a.ctx, "UPDATE audit_chain SET tail_position = $1, tail_hash = $2 WHERE id = 1", a.pos, a.hash)
	return err
}

// mark is the applier's chain state at a savepoint.
type mark struct {
	pos  int64
	hash string
	n    int
}

func (a *applier) mark() mark { return mark{pos: a.pos, hash: a.hash, n: len(a.assigned)} }

// restore unassigns the entries after m; mark{} unassigns all of them when
// the transaction is abandoned.
func (a *applier) restore(m mark) {
	for _, e := range a.assigned[m.n:] {
		e.Position, e.Hash, e.PrevHash = 0, "", ""
	}
	a.assigned = a.assigned[:m.n]
	a.pending = nil
	a.pos, a.hash = m.pos, m.hash
}

// command applies one command inside a savepoint. It returns an error only
// for transaction-level failures.
func (a *applier) command(cmd persistence.Command) (persistence.Result, error) {
	if _, err := a.tx.Exec(a.ctx, "SAVEPOINT cmd"); err != nil {
		return persistence.Result{}, err
	}
	m := a.mark()
	res, err := a.dispatch(cmd)
	if err == nil {
		// Audit rows are written per command here, so that a duplicate
		// event id fails its own command.
		err = a.flushAudit()
	}
	if err != nil {
		var cmdErr *errs.Error
		if !errors.As(err, &cmdErr) {
			return persistence.Result{}, err
		}
		if _, err := a.tx.Exec(a.ctx, "ROLLBACK TO SAVEPOINT cmd"); err != nil {
			return persistence.Result{}, err
		}
		a.restore(m)
		return persistence.Result{Err: err}, nil
	}
	if _, err := a.tx.Exec(a.ctx, "RELEASE SAVEPOINT cmd"); err != nil {
		return persistence.Result{}, err
	}
	return res, nil
}

func (a *applier) dispatch(cmd persistence.Command) (persistence.Result, error) {
	switch c := cmd.(type) {
	case *persistence.CreateSession:
		return a.createSession(c)
	case *persistence.AppendMessages:
		return a.appendMessages(c)
	case *persistence.UpdateSession:
		return a.updateSession(c)
	case *persistence.DeleteSession:
		return a.deleteSession(c)
	case *persistence.PlanWrite:
		return a.planWrite(c)
	case *persistence.RecordAudit:
		return persistence.Result{}, a.audit(c.Entries)
	case *persistence.PruneAudit:
		return a.pruneAudit(c)
	case *persistence.Activate:
		return a.activate(c)
	case nil:
		return persistence.Result{}, errs.InvalidArgument("nil command")
	default:
		return persistence.Result{}, errs.InvalidArgument("unknown command %T", cmd)
	}
}

// exec runs one statement of a command; a value the server rejects is the
// command's INVALID_ARGUMENT.
func (a *applier) exec(query string, args ...any) (pgconn.CommandTag, error) {
	tag, err := a.tx.Exec(a.ctx, query, args...)
	return tag, dataException(err)
}

// queryRow runs one single-row query of a command and scans it.
func (a *applier) queryRow(query string, args []any, dest ...any) error {
	return dataException(a.tx.QueryRow(a.ctx, query, args...).Scan(dest...))
}
