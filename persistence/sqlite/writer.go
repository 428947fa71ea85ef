package sqlite

import (
	"context"
	"database/sql"
	"errors"

	auditv1 "github.com/agentstate/agentstate/messages/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

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

// Apply runs batch in one BEGIN IMMEDIATE transaction, each command inside
// its own SAVEPOINT. A command that fails on its own (its error is an
// *errs.Error) is rolled back to its savepoint and reported in its Result;
// any other error aborts the transaction: nothing is stored, every audit
// entry of the batch is unassigned again, and the error is returned.
func (w *writer) Apply(ctx context.Context, batch []persistence.Command) ([]persistence.Result, error) {
	s := w.s
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if w.released {
		return nil, errs.FailedPrecondition("writer was released")
	}
	if s.closed {
		return nil, errs.Unavailable("store %s is closed", s.loc.key)
	}
	tx, err := s.wconn.BeginTx(ctx, nil)
	if err != nil {
		return nil, storeErr("begin", err)
	}
	a := &applier{ctx: ctx, tx: tx, pos: s.lastPos, hash: s.lastHash}
	results := make([]persistence.Result, len(batch))
	for i, cmd := range batch {
		res, err := a.command(cmd)
		if err != nil {
			a.restore(mark{})
			_ = tx.Rollback()
			return nil, storeErr("apply", err)
		}
		results[i] = res
	}
	if err := tx.Commit(); err != nil {
		a.restore(mark{})
		_ = tx.Rollback()
		return nil, storeErr("commit", err)
	}
	s.lastPos, s.lastHash = a.pos, a.hash
	s.maybeCheckpoint()
	return results, nil
}

// applier carries one transaction. pos and hash are the chain's tail
// including every entry inserted so far in the transaction; assigned lists
// those entries, so a rollback can unassign them.
type applier struct {
	ctx      context.Context
	tx       *sql.Tx
	pos      int64
	hash     string
	assigned []*auditv1.AuditEntry
}

// mark is the applier's chain state at a savepoint.
type mark struct {
	pos  int64
	hash string
	n    int
}

func (a *applier) mark() mark { return mark{pos: a.pos, hash: a.hash, n: len(a.assigned)} }

// restore unassigns the entries after m. mark{} restores everything but
// pos and hash, which the Store keeps unchanged when a transaction fails.
func (a *applier) restore(m mark) {
	for _, e := range a.assigned[m.n:] {
		e.Position, e.Hash, e.PrevHash = 0, "", ""
	}
	a.assigned = a.assigned[:m.n]
	a.pos, a.hash = m.pos, m.hash
}

// command applies one command inside a savepoint. It returns an error only
// for transaction-level failures.
func (a *applier) command(cmd persistence.Command) (persistence.Result, error) {
	if _, err := a.tx.ExecContext(a.ctx, "SAVEPOINT cmd"); err != nil {
		return persistence.Result{}, err
	}
	m := a.mark()
	res, err := a.dispatch(cmd)
	if err != nil {
		var cmdErr *errs.Error
		if !errors.As(err, &cmdErr) {
			return persistence.Result{}, err
		}
		if _, err := a.tx.ExecContext(a.ctx, "ROLLBACK TO cmd; RELEASE cmd"); err != nil {
			return persistence.Result{}, err
		}
		a.restore(m)
		return persistence.Result{Err: cmdErr}, nil
	}
	if _, err := a.tx.ExecContext(a.ctx, "RELEASE cmd"); err != nil {
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
	case nil:
		return persistence.Result{}, errs.InvalidArgument("nil command")
	default:
		return persistence.Result{}, errs.InvalidArgument("unknown command %T", cmd)
	}
}

func (a *applier) exec(query string, args ...any) (sql.Result, error) {
	return a.tx.ExecContext(a.ctx, query, args...)
}

func (a *applier) queryRow(query string, args ...any) *sql.Row {
	return a.tx.QueryRowContext(a.ctx, query, args...)
}

func rowsAffected(res sql.Result) (int64, error) { return res.RowsAffected() }
