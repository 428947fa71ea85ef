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
// agentstate the audit actor holds it.
//
// Writing. Writer.Apply runs a batch in one BEGIN IMMEDIATE transaction
// with one SAVEPOINT per command: see persistence.Writer for the result
// semantics. Audit entries get positions (commit order, never reused, also
// after a prune) and hashes (persistence.AuditHash) chained on the last
// committed entry.
//
// WAL bound. Readers never keep a read transaction across calls (each
// Reader method is one statement), so checkpoints can complete. After a
// commit that leaves the WAL above 64 MiB the writer runs a TRUNCATE
// checkpoint that waits at most 20 ms for readers and otherwise retries
// after the next commit; journal_size_limit caps what SQLite's own
// checkpoints leave behind.
//
// Faults (test hooks). SetMaxPageCount caps the database's size so the next
// growing transaction fails with RESOURCE_EXHAUSTED, as on a full disk;
// PageCount gives the current size to cap it at. SetReadOnly(true) makes
// every write fail with UNAVAILABLE, as on a read-only file. Both are undone
// by the opposite call, after which Apply succeeds again.
package sqlite
