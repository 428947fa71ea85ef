// Package sqlite is the SQLite implementation of persistence.Store
// (github.com/mattn/go-sqlite3).
//
// Opening. Open(url) returns the process's one *Store for that database:
// concurrent and repeated Opens of one URL share it (reference-counted;
// each Open needs one Close, the last Close closes the database). The
// database is opened and migrated once, by the first Open; the others wait
// for it. A failed open is not remembered, so a later Open retries.
//
//	sqlite.Open("./data/agentstate.db")        // a file; parent dirs are created
//	sqlite.Open("file:/var/lib/agentstate.db") // the same, explicitly
//	sqlite.Open("memory:test-42")              // in memory, shared by name
//	sqlite.Open("x.db?synchronous=normal")     // durability option
//
// Paths are made absolute and cleaned, so "./x.db" and "/cwd/x.db" are one
// database. Opening an open database with a different synchronous option
// is INVALID_ARGUMENT.
//
// Durability. File databases run in WAL mode with synchronous=FULL by
// default: a commit returns after the WAL is fsynced. synchronous=normal
// fsyncs only at checkpoints (a power loss may lose the last commits, a
// process crash does not). Every connection gets its pragmas through its
// DSN: journal mode, synchronous, busy_timeout, foreign_keys=ON.
//
// In memory. "memory:NAME" uses SQLite's memdb VFS ("file:/NAME?vfs=memdb"):
// one database per name, shared by every connection of the process, and
// alive while the Store is open. memdb has no WAL (its rollback journal is
// in memory), so a commit briefly excludes readers; they wait through
// busy_timeout. A shared-cache ":memory:" database was not used: its table
// locks fail readers with SQLITE_LOCKED instead of waiting.
//
// Ownership. A Store has one writer connection, used only by the Writer
// (and the test hooks), and a separate pool of read-only (query_only)
// connections behind Reader. Store.Writer hands the writer out once; a
// second call before Release is FAILED_PRECONDITION (ErrWriterTaken). In
// agentstate the writer (actors/writer) holds it.
//
// Writing. Writer.Apply runs a batch in one BEGIN IMMEDIATE transaction:
// see persistence.Writer for the result semantics. It first runs the batch
// without savepoints, with message and audit rows written in multi-row
// INSERTs; only if a command fails on its own (or an append meets a stored
// message id: a retried turn) does it roll back and run the batch again
// with one SAVEPOINT per command and rows inserted one by one, so that the
// failure is rolled back alone and a retried turn is told apart.
// Audit entries get positions (commit order, never reused, also after a
// prune) and hashes (persistence.AuditHash) chained on the last committed
// entry, which each transaction reads under the write lock (so a rollback
// leaves nothing stale, and even a second process writing the file cannot
// fork the chain). Apply's context is checked between commands; it is never
// handed to database/sql, which would discard the pinned writer connection
// of a cancelled transaction.
//
// Fencing. Activate upserts the key's row in the owners table (schema
// version 2), incrementing its epoch, and returns the new epoch. Every
// fenced command (CreateSession, AppendMessages, UpdateSession,
// DeleteSession, PlanWrite) first looks up its key's epoch, inside its own
// savepoint, and fails with persistence.ErrFenced (wrapped: which key,
// which epochs) unless it carries exactly that epoch; no row counts as 0.
// The lookup is one primary-key read; because the writer holds the write
// lock for the whole transaction, nothing can activate between the check
// and the write, and an activation earlier in the same batch fences the
// commands after it.
//
// Reading. Each Reader method runs one short SQL statement (ListAudit may
// add a second to tell an unknown cursor from an empty page), so it sees a
// committed state and holds no snapshot after it returns. A session's
// message_count is its next_sequence column, which Apply moves in the same
// statement that checks an append's NextSequence.
//
// Checkpoints. COMMIT does not checkpoint (wal_autocheckpoint=0 on the
// writer's connection): a checkpointer goroutine with a connection of its
// own, woken after commits, copies the WAL back once 1,000 frames wait,
// concurrently with commits, and then, holding the writer's mutex for the
// last few frames and an fsync, lets the next transaction restart the WAL
// (checkpointer.go). So no commit pays for copying the WAL, and the WAL
// file stays a few MiB under steady writes.
//
// WAL bound. Because no reader keeps a snapshot across calls, checkpoints
// can complete. After a commit that leaves the WAL above 64 MiB (readers
// kept the checkpointer from restarting it) the writer runs a TRUNCATE
// checkpoint that waits at most 20 ms for readers and else retries after
// the next commit; above 256 MiB it waits up to 2 s. So the WAL stays near
// 256 MiB plus one transaction even under steady reads.
// journal_size_limit caps what a restart leaves of a larger WAL file.
//
// Test hooks. Opens counts database opens in the process, MigrationRuns
// the migrations a Store applied, Checkpoints the forced WAL checkpoints,
// CheckpointCounts those and the checkpointer's.
//
// Faults (test hooks). SetMaxPageCount caps the database's size so the next
// growing transaction fails with RESOURCE_EXHAUSTED, as on a full disk;
// PageCount gives the current size to cap it at. SetReadOnly(true) makes
// every write fail with UNAVAILABLE, as on a read-only file. Both are undone
// by the opposite call, after which Apply succeeds again.
package sqlite
