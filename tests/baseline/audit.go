package baseline

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

const auditSchema = `
CREATE TABLE IF NOT EXISTS audit_log (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	event_type TEXT NOT NULL,
	details    TEXT NOT NULL,
	created_at TEXT NOT NULL
);`

const insertAuditRow = `INSERT INTO audit_log (event_type, details, created_at) VALUES (?, ?, ?)`

// auditRow is an AuditLogModel row before it is flushed.
type auditRow struct {
	EventType string
	Details   string
	CreatedAt string
}

// AuditEntry is a stored audit_log row.
type AuditEntry struct {
	ID        int64
	EventType string
	Details   string
	CreatedAt string
}

// AuditService ports AuditService (application/services/audit_service.py)
// in its default async mode (#1279): Record enqueues and returns the
// placeholder id -1; one background writer drains the queue with
// _write_payload (session.add + session.commit); ListEntries, Count,
// GetEntry and Prune run on the caller's goroutine.
//
// It keeps the seed's defect on purpose (seed 002, lines 209–234, 268–281,
// 434–451): the writer and every caller use the same session, hence the
// same connection, transaction and pending set.
type AuditService struct {
	db      *sql.DB
	session *ormSession
	queue   chan auditRow
	stopped chan struct{}
	stop    sync.Once

	failMu        sync.Mutex
	writeFailures int64
	lastFailure   error
}

// OpenAuditService opens (creating) the SQLite file at path, creates the
// audit_log table and starts the writer ("audit-writer" upstream).
func OpenAuditService(path string) (*AuditService, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=30000")
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(auditSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("baseline: audit schema: %w", err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		db.Close()
		return nil, err
	}
	a := &AuditService{
		db:      db,
		session: &ormSession{conn: conn},
		queue:   make(chan auditRow, 10000), // audit_queue_maxsize default
		stopped: make(chan struct{}),
	}
	go a.writerLoop()
	return a, nil
}

// Record mirrors record() in async mode: the entry is accepted (queued)
// and the placeholder id -1 returned. Blocks when the queue is full.
func (a *AuditService) Record(eventType, details string) int64 {
	a.queue <- auditRow{EventType: eventType, Details: details, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	return -1
}

// writerLoop mirrors _writer_loop: each payload goes through
// _write_payload; a failure is logged (counted here) and the loop moves on
// to the next payload, so the failed entry is gone.
func (a *AuditService) writerLoop() {
	defer close(a.stopped)
	ctx := context.Background()
	for row := range a.queue {
		// _write_payload: session = self._ensure_session();
		// session.add(row); session.commit()
		a.session.add(row)
		if err := a.session.commit(ctx); err != nil {
			a.failMu.Lock()
			a.writeFailures++
			a.lastFailure = err
			a.failMu.Unlock()
		}
	}
}

// WriteFailures reports how many payloads the writer failed to commit, and
// the last error.
func (a *AuditService) WriteFailures() (int64, error) {
	a.failMu.Lock()
	defer a.failMu.Unlock()
	return a.writeFailures, a.lastFailure
}

// ListEntries mirrors list_entries: a query on the shared session (which
// autoflushes first), newest first.
func (a *AuditService) ListEntries(ctx context.Context, limit int) ([]AuditEntry, error) {
	if err := a.session.flush(ctx, true); err != nil {
		return nil, err
	}
	releaseGIL()
	rows, err := a.session.conn.QueryContext(ctx,
		`SELECT id, event_type, details, created_at FROM audit_log ORDER BY id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		if err := rows.Scan(&e.ID, &e.EventType, &e.Details, &e.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Count mirrors count(): autoflush, then SELECT COUNT(*).
func (a *AuditService) Count(ctx context.Context) (int64, error) {
	if err := a.session.flush(ctx, true); err != nil {
		return 0, err
	}
	releaseGIL()
	var n int64
	err := a.session.conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_log`).Scan(&n)
	return n, err
}

// GetEntry mirrors get_entry(id); ok is false when no such entry exists.
func (a *AuditService) GetEntry(ctx context.Context, id int64) (e AuditEntry, ok bool, err error) {
	if err := a.session.flush(ctx, true); err != nil {
		return e, false, err
	}
	releaseGIL()
	err = a.session.conn.QueryRowContext(ctx,
		`SELECT id, event_type, details, created_at FROM audit_log WHERE id = ?`, id).
		Scan(&e.ID, &e.EventType, &e.Details, &e.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return e, false, nil
	}
	return e, err == nil, err
}

// Prune mirrors prune(): a bulk DELETE of entries created before cutoff
// and a commit, on the shared session, with the usual SQLAlchemy error
// handling ([inferred]; the upstream body is not public):
//
//	try:
//	    n = session.query(AuditLogModel).filter(created_at < cutoff).delete()
//	    session.commit()
//	except Exception:
//	    session.rollback()
//	    raise
func (a *AuditService) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	n, err := a.prune(ctx, cutoff)
	if err != nil {
		var rb rolledBack
		if !errors.As(err, &rb) {
			a.session.rollback(ctx)
		}
		return 0, err
	}
	return n, nil
}

func (a *AuditService) prune(ctx context.Context, cutoff time.Time) (int64, error) {
	if err := a.session.flush(ctx, true); err != nil {
		return 0, err
	}
	n, err := a.session.execDML(ctx, `DELETE FROM audit_log WHERE created_at < ?`,
		cutoff.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return 0, err
	}
	return n, a.session.commit(ctx)
}

// Flush mirrors flush(): stop sentinel, then join the writer, so every
// payload queued before it has been handed to _write_payload. Record must
// not be called afterwards.
func (a *AuditService) Flush() {
	a.stop.Do(func() { close(a.queue) })
	<-a.stopped
}

// Close mirrors close(): flush, then close the session (which rolls back
// anything still uncommitted on its connection) and the engine.
func (a *AuditService) Close() error {
	a.Flush()
	serr := a.session.close(context.Background())
	if err := a.db.Close(); err != nil {
		return err
	}
	return serr
}

// ReadAuditLog opens the database file at path on a fresh connection and
// returns every committed entry in id order. Use it after Close, to see
// what the port really stored.
func ReadAuditLog(path string) ([]AuditEntry, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=30000")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, event_type, details, created_at FROM audit_log ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		if err := rows.Scan(&e.ID, &e.EventType, &e.Details, &e.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
