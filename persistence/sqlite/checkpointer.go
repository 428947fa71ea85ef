package sqlite

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
)

// checkpointFrames is how many WAL frames (pages) wait to be copied back
// into the database file before the checkpointer runs: SQLite's own
// wal_autocheckpoint default, so the database file trails the WAL by as
// much as it did when SQLite checkpointed inside COMMIT.
const checkpointFrames = 1000

// checkpointer copies the WAL back into the database file of a file
// database, off the commit path.
//
// Why: SQLite's automatic checkpoint runs inside the COMMIT that takes the
// WAL past wal_autocheckpoint pages, on the writer's connection, so one
// transaction in ~50 of 64 appends (node bench W1) also copied ~1,000
// pages and fsynced the database file, and every append waiting on the
// writer waited for it too (docs/bench/HISTORY.md).
// So the writer's connection runs with wal_autocheckpoint=0 and, after each
// commit, wakes this goroutine (a non-blocking send: the writer never waits
// for it), which does the copying on a connection of its own.
//
// Each round, once checkpointFrames frames wait:
//  1. a PASSIVE checkpoint, concurrent with the writer's commits: it copies
//     the frames committed when it started and takes no lock a commit
//     needs;
//  2. an fsync of the database file, still concurrent, so that step 3
//     finds little left to sync;
//  3. with the writer's mutex (Store.wmu) held, so no commit lands,
//     another PASSIVE checkpoint: it copies the frames that came during 1
//     and 2 (a transaction or two) and, having copied every frame, syncs
//     the database file and records the WAL as fully copied, so that the
//     next transaction starts the WAL over from its beginning instead of
//     appending to it. The writer waits for this step only, and only if it
//     has a batch ready meanwhile.
//
// The WAL only starts over when a transaction begins after a checkpoint
// copied every frame and no reader still reads frames of it (SQLite's
// walRestartLog). Concurrent passes alone rarely get there under steady
// writes: a commit lands during most of them, so step 3 excludes commits
// for the short tail of the copy. A reader that holds a snapshot limits
// what can be copied and a reader that began before step 3 can make the
// next transaction append rather than restart; the writer's own TRUNCATE
// checkpoint above walLimit (maybeCheckpoint) stays the hard bound.
//
// Durability: a checkpoint never writes the WAL, and copies only frames of
// committed transactions (up to the last commit when it read the WAL
// index, and none newer than a running reader's snapshot), after syncing
// the WAL. A pass that sees frames committed meanwhile records its progress
// without syncing the database file, but then frames remain uncopied, so
// the WAL is not restarted and a crash recovers every frame from it; the
// WAL's frames are overwritten only after a pass that copied them all and
// synced the database file. Acknowledged commits thus depend only on their
// own WAL fsync, as before.
//
// Invariants: only run uses conn and file; Store.ckmu is held around every
// checkpoint that copies frames (this one's and the writer's forced one), so
// they never race for SQLite's checkpoint lock, and it is taken after wmu
// when both are held; stop returns only once run has returned.
type checkpointer struct {
	s    *Store
	db   *sql.DB
	conn *sql.Conn
	file *os.File
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
	// frames is checkpointFrames but for tests.
	frames atomic.Int64
}

// checkpointerDSN is the DSN of the checkpointer's connection: it only
// checkpoints. busy_timeout 0: PASSIVE never waits anyway, and nothing
// this connection runs may sleep in SQLite's busy handler (which polls in
// steps of milliseconds) while it holds the writer's mutex. synchronous is
// the Store's: a checkpoint syncs the WAL and the database file by it.
func (l location) checkpointerDSN() string {
	q := url.Values{}
	q.Set("_busy_timeout", "0")
	q.Set("_synchronous", string(l.sync))
	q.Set("_stmt_cache_size", "4")
	q.Set("_cache_size", strconv.Itoa(-l.cacheKiB))
	return l.dsn(q, false)
}

// startCheckpointer opens the checkpointer's connection and starts it; a
// memory database has no WAL and gets none.
func (s *Store) startCheckpointer(ctx context.Context) error {
	if s.walPath == "" {
		return nil
	}
	c := &checkpointer{s: s, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	c.frames.Store(checkpointFrames)
	var err error
	if c.db, err = sql.Open("sqlite3", s.loc.checkpointerDSN()); err != nil {
		return err
	}
	c.db.SetMaxOpenConns(1)
	c.db.SetMaxIdleConns(1)
	c.db.SetConnMaxLifetime(0)
	c.db.SetConnMaxIdleTime(0)
	if c.conn, err = c.db.Conn(ctx); err != nil {
		_ = c.db.Close()
		return err
	}
	if c.file, err = os.Open(s.loc.path); err != nil {
		_ = c.conn.Close()
		_ = c.db.Close()
		return err
	}
	s.ckpt = c
	go c.run()
	return nil
}

// poke wakes the checkpointer after a commit; it never blocks.
func (c *checkpointer) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// stop ends run and closes what it used. Called by shutdown before it
// takes wmu: run may be waiting for wmu.
func (c *checkpointer) stop() error {
	close(c.quit)
	<-c.done
	first := c.file.Close()
	for _, err := range []error{c.conn.Close(), c.db.Close()} {
		if first == nil {
			first = err
		}
	}
	return first
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.quit:
			return
		case <-c.wake:
		}
		c.round()
	}
}

// round runs one round if checkpointFrames frames wait. Its failures are
// dropped: the next commit wakes it again, and if the WAL keeps growing
// the writer's forced checkpoint bounds it (a failing disk shows in the
// writer's commits).
func (c *checkpointer) round() {
	s := c.s
	_, log, copied, err := c.checkpoint("NOOP")
	if err != nil || log-copied < c.frames.Load() {
		return
	}
	s.ckmu.Lock()
	_, _, _, err = c.checkpoint("PASSIVE")
	s.ckmu.Unlock()
	if err != nil {
		return
	}
	s.passes.Add(1)
	if c.file.Sync() != nil {
		return
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.ckmu.Lock()
	defer s.ckmu.Unlock()
	_, log, copied, err = c.checkpoint("PASSIVE")
	if err == nil && log == copied {
		s.restarts.Add(1)
	}
}

// checkpoint runs PRAGMA wal_checkpoint(mode) on the checkpointer's
// connection: busy is 1 when it could not finish (readers, or another
// checkpoint), log the WAL's frames, copied those in the database file.
// NOOP (SQLite 3.51 and later) copies nothing: it only reads log and
// copied.
func (c *checkpointer) checkpoint(mode string) (busy, log, copied int64, err error) {
	err = c.conn.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &log, &copied)
	return busy, log, copied, err
}

// CheckpointCounts counts the WAL checkpoints of a file database since it
// was opened.
type CheckpointCounts struct {
	// Passes: the checkpointer's concurrent PASSIVE checkpoints.
	Passes int64
	// Restarts: its rounds that left every frame copied back and the
	// database file synced, after which the next transaction starts the
	// WAL over unless a reader still reads from it.
	Restarts int64
	// Forced: the writer's TRUNCATE checkpoints above the WAL's size
	// limit (Checkpoints).
	Forced int64
}

// CheckpointCounts returns the checkpoints so far.
func (s *Store) CheckpointCounts() CheckpointCounts {
	return CheckpointCounts{Passes: s.passes.Load(), Restarts: s.restarts.Load(), Forced: s.checkpoints.Load()}
}
