package baseline

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// ErrAlreadyFlushing mirrors SQLAlchemy's
// InvalidRequestError("Session is already flushing").
var ErrAlreadyFlushing = errors.New("baseline: Session is already flushing")

// rolledBack marks an error after which the session has already rolled
// back its transaction (SQLAlchemy then does not issue a second DBAPI
// rollback for it).
type rolledBack struct{ error }

func (e rolledBack) Unwrap() error { return e.error }

// ormSession ports the behaviour of one SQLAlchemy Session bound to one
// pysqlite connection that the audit race depends on — and nothing else.
// Upstream, AuditService._ensure_session returns this one object to every
// thread (seed 002).
//
// What is kept, each rule from SQLAlchemy 2.0 / pysqlite defaults:
//   - add puts the row in the session's pending set (session.new).
//   - flush inserts every pending row; it refuses to run while another
//     flush runs ("already flushing"), except that autoflush (run before
//     every query) silently skips then. A flush that fails rolls the
//     session back, and so does a commit whose flush fails.
//   - pysqlite's legacy transaction control: before a DML statement the
//     driver reads sqlite3_get_autocommit and, if no transaction is open,
//     executes BEGIN; commit() and rollback() execute COMMIT / ROLLBACK
//     only if a transaction is open. The read and the statement are two
//     steps; pysqlite releases the GIL around the statement.
//   - rollback discards the connection's transaction and expunges the
//     pending rows.
//
// Per-operation atomicity only: mu (the GIL) guards each read or write of
// the session's attributes, and the connection's own lock makes each
// statement atomic; no sequence of them is atomic, exactly as upstream.
type ormSession struct {
	conn *sql.Conn

	mu       sync.Mutex
	pending  []auditRow
	flushing bool
}

// add mirrors session.add(row).
func (s *ormSession) add(r auditRow) {
	s.mu.Lock()
	s.pending = append(s.pending, r)
	s.mu.Unlock()
}

// flush mirrors Session.flush (explicit) and Session._autoflush (auto).
func (s *ormSession) flush(ctx context.Context, auto bool) error {
	s.mu.Lock()
	if s.flushing {
		s.mu.Unlock()
		if auto {
			return nil // _autoflush: `if self.autoflush and not self._flushing`
		}
		return ErrAlreadyFlushing
	}
	if len(s.pending) == 0 { // _is_clean()
		s.mu.Unlock()
		return nil
	}
	s.flushing = true
	rows := s.pending
	s.pending = nil
	s.mu.Unlock()

	var err error
	for _, r := range rows {
		if _, err = s.execDML(ctx, insertAuditRow, r.EventType, r.Details, r.CreatedAt); err != nil {
			break
		}
	}
	s.mu.Lock()
	s.flushing = false
	s.mu.Unlock()
	if err != nil {
		// flush(): transaction.rollback(_capture_exception=True).
		s.rollback(ctx)
		return rolledBack{err}
	}
	return nil
}

// commit mirrors Session.commit: flush, then the connection's commit.
func (s *ormSession) commit(ctx context.Context) error {
	if err := s.flush(ctx, false); err != nil {
		// _prepare_impl rolls back when its flush raises. A flush that
		// failed has rolled back already (SQLAlchemy does not issue the
		// DBAPI rollback twice); one refused as "already flushing" has not.
		if errors.Is(err, ErrAlreadyFlushing) {
			s.rollback(ctx)
			return rolledBack{err}
		}
		return err
	}
	auto, err := s.autocommit(ctx)
	if err != nil || auto {
		return err
	}
	releaseGIL()
	_, err = s.conn.ExecContext(ctx, "COMMIT")
	return err
}

// rollback mirrors Session.rollback: the connection's rollback, then the
// pending rows are expunged.
func (s *ormSession) rollback(ctx context.Context) error {
	s.mu.Lock()
	s.pending = nil
	s.mu.Unlock()
	auto, err := s.autocommit(ctx)
	if err != nil || auto {
		return err
	}
	releaseGIL()
	_, err = s.conn.ExecContext(ctx, "ROLLBACK")
	return err
}

// execDML runs one INSERT/UPDATE/DELETE the way pysqlite does: BEGIN
// first when the connection is in autocommit mode. It returns the rows
// affected.
func (s *ormSession) execDML(ctx context.Context, query string, args ...any) (int64, error) {
	auto, err := s.autocommit(ctx)
	if err != nil {
		return 0, err
	}
	if auto {
		// Between the read above and this BEGIN another thread can
		// begin too: "cannot start a transaction within a transaction".
		releaseGIL()
		if _, err := s.conn.ExecContext(ctx, "BEGIN"); err != nil {
			return 0, err
		}
	}
	releaseGIL()
	res, err := s.conn.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// autocommit reads sqlite3_get_autocommit on the session's connection.
func (s *ormSession) autocommit(ctx context.Context) (bool, error) {
	var auto bool
	err := s.conn.Raw(func(dc any) error {
		c, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return errors.New("baseline: not a go-sqlite3 connection")
		}
		auto = c.AutoCommit()
		return nil
	})
	return auto, err
}

// close mirrors Session.close: roll back whatever is open, release the
// connection.
func (s *ormSession) close(ctx context.Context) error {
	rerr := s.rollback(ctx)
	if err := s.conn.Close(); err != nil {
		return err
	}
	return rerr
}
