package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

const (
	// readerConns bounds the read-only pool.
	readerConns = 8
	// walCheckpointBytes is the WAL size above which the writer forces a
	// TRUNCATE checkpoint after a commit; journalSizeLimit is what SQLite
	// truncates the WAL to when it resets it on its own.
	walCheckpointBytes = 64 << 20
	journalSizeLimit   = 32 << 20
	// settleRows is how many message rows may be pending (schema
	// migrations 5 and 7) before the writer settles a slice of them into
	// the per-session index (settleSlices). More pending rows mean fewer,
	// fuller index leaves per settle but a larger pending table for every
	// append and read to share: at 512, W1's 64 sessions settle ~8 entries
	// per session leaf (docs/bench/HISTORY.md).
	settleRows = 512
)

// SettleRows and PendingRowsPerSession are settleRows and
// pendingRowsPerSession (writer.go), for the raw ceiling of node bench,
// which stores the same rows the same way.
const (
	SettleRows            = settleRows
	PendingRowsPerSession = pendingRowsPerSession
)

// Store is one open SQLite database, shared by every Open of its URL in
// the process. It implements persistence.Store.
//
// Invariants: the writer connection (wconn, the only connection of wdb) is
// the only connection that writes, and it is never in the read pool (rdb),
// whose connections are query_only; at most one Writer is held at a time.
type Store struct {
	loc location
	// The registry's open-once bookkeeping (registry.go).
	persistence.Shared
	// The namespaces' quotas, read once per transaction.
	persistence.QuotaSlot

	// Set by open, read-only afterwards.
	wdb           *sql.DB
	wconn         *sql.Conn
	rdb           *sql.DB
	reader        *sqlstore.Reader
	migrationRuns int
	walPath       string

	// wmu serializes everything that uses wconn: Apply, Writer, the test
	// hooks and checkpoints. It guards the fields below.
	wmu      persistence.WriterSlot
	walLimit int64

	// pending counts the message rows not yet settled (see settle), as
	// of the last commit; settleFrom is the session after which the next
	// settle starts ("": the first); settleAt is settleRows but for tests.
	// Guarded by wmu.
	pending    int64
	settleFrom string
	settleAt   int64
	// names caches sessions' stored namespaces for the appends' advances
	// (sessionNames in usage.go). Guarded by wmu.
	names sessionNames

	// ckpt is the checkpointer of a file database (nil for memory);
	// ckmu serializes the checkpoints that copy frames (checkpointer.go).
	ckpt *checkpointer
	ckmu sync.Mutex

	checkpoints    atomic.Int64
	passes         atomic.Int64
	restarts       atomic.Int64
	settleFailures atomic.Int64
}

var _ persistence.Store = (*Store)(nil)

func newStore(loc location) *Store {
	return &Store{
		loc:      loc,
		walLimit: walCheckpointBytes,
		settleAt: settleRows,
	}
}

// open connects the writer, migrates, and connects the read pool.
func (s *Store) open() (err error) {
	ctx := context.Background()
	if s.loc.path != "" {
		if err := os.MkdirAll(filepath.Dir(s.loc.path), 0o755); err != nil {
			return errs.Unavailable("create directory of %s: %v", s.loc.path, err)
		}
		s.walPath = s.loc.path + "-wal"
	}
	defer func() {
		if err != nil {
			s.closeConns()
		}
	}()
	s.wdb, err = sql.Open("sqlite3", s.loc.writerDSN())
	if err != nil {
		return storeErr("open "+s.loc.key, err)
	}
	// One connection, pinned for the Store's life: it is the writer, and
	// for a memory database it keeps the database alive.
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	s.wconn, err = s.wdb.Conn(ctx)
	if err != nil {
		return storeErr("open "+s.loc.key, err)
	}
	if s.loc.path != "" {
		var mode string
		if err := s.wconn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			return storeErr("open "+s.loc.key, err)
		}
		if !strings.EqualFold(mode, "wal") {
			return errs.Unavailable("open %s: journal_mode is %q, want wal (is the file system local?)", s.loc.key, mode)
		}
		if _, err := s.wconn.ExecContext(ctx, fmt.Sprintf("PRAGMA journal_size_limit = %d", journalSizeLimit)); err != nil {
			return storeErr("open "+s.loc.key, err)
		}
		// The checkpointer copies the WAL back, not the writer's COMMIT
		// (checkpointer.go).
		if _, err := s.wconn.ExecContext(ctx, "PRAGMA wal_autocheckpoint = 0"); err != nil {
			return storeErr("open "+s.loc.key, err)
		}
	}
	if s.migrationRuns, err = migrate(ctx, s.wconn); err != nil {
		return storeErr("migrate "+s.loc.key, err)
	}
	if err := s.wconn.QueryRowContext(ctx, `SELECT count(*) FROM message_pending`).Scan(&s.pending); err != nil {
		return storeErr("open "+s.loc.key, err)
	}
	s.rdb, err = sql.Open("sqlite3", s.loc.readerDSN())
	if err != nil {
		return storeErr("open "+s.loc.key, err)
	}
	s.rdb.SetMaxOpenConns(readerConns)
	s.rdb.SetMaxIdleConns(readerConns)
	s.rdb.SetConnMaxIdleTime(0)
	s.rdb.SetConnMaxLifetime(0)
	if err := s.rdb.PingContext(ctx); err != nil {
		return storeErr("open "+s.loc.key, err)
	}
	s.reader = sqlstore.NewReader(poolDB{db: s.rdb}, &reader{db: s.rdb})
	// Last: nothing after it can fail, so open's cleanup never has a
	// running checkpointer to stop.
	if err := s.startCheckpointer(ctx); err != nil {
		return storeErr("open "+s.loc.key, err)
	}
	return nil
}

func (s *Store) closeConns() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if s.rdb != nil {
		keep(s.rdb.Close())
	}
	if s.wconn != nil {
		keep(s.wconn.Close())
	}
	if s.wdb != nil {
		keep(s.wdb.Close())
	}
	return first
}

// shutdown closes the database once the last handle is gone. A Writer still
// held afterwards fails with UNAVAILABLE.
func (s *Store) shutdown() error {
	// The checkpointer first, before wmu: it may be waiting for wmu, and
	// it must be gone before its database's connections close.
	var first error
	if s.ckpt != nil {
		first = s.ckpt.stop()
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wmu.Close()
	if err := s.closeConns(); first == nil {
		first = err
	}
	return storeErr("close "+s.loc.key, first)
}

// Reader returns the read side, on the read-only pool.
func (s *Store) Reader() persistence.Reader { return s.reader }

// Writer hands out the sole writer.
func (s *Store) Writer() (persistence.Writer, error) {
	lease, err := s.wmu.Take(s.loc.key)
	if err != nil {
		return nil, err
	}
	return &writer{WriterLease: lease, s: s}, nil
}

// loadChainTail returns the position and hash the next audit entry chains
// on: the last stored entry's, else the prune anchor's, else (0, "").
//
// Apply reads it inside each transaction, under the write lock, instead of
// keeping it in memory: then no rollback can leave a stale copy behind, and
// even a second process writing the same file cannot fork the chain. It is
// one index probe per transaction.
func loadChainTail(ctx context.Context, conn interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int64, string, error) {
	var pos int64
	var hash string
	err := conn.QueryRowContext(ctx, `SELECT position, hash FROM audit_log ORDER BY position DESC LIMIT 1`).Scan(&pos, &hash)
	if err == nil {
		return pos, hash, nil
	}
	if err != sql.ErrNoRows {
		return 0, "", err
	}
	err = conn.QueryRowContext(ctx, `SELECT anchor_position, anchor_hash FROM audit_meta WHERE id = 1`).Scan(&pos, &hash)
	if err == sql.ErrNoRows {
		return 0, "", nil
	}
	return pos, hash, err
}

// URL returns the normalized registry key ("file:/abs/path" or
// "memory:NAME").
func (s *Store) URL() string { return s.loc.key }

// MigrationRuns returns how many schema migrations this Store applied when
// it opened the database: len(migrations) for a new database, 0 for one
// that was current.
func (s *Store) MigrationRuns() int { return s.migrationRuns }

// Checkpoints returns how many forced WAL checkpoints completed.
func (s *Store) Checkpoints() int64 { return s.checkpoints.Load() }
