// Package postgres is the PostgreSQL implementation of persistence.Store
// (github.com/jackc/pgx/v5), for several nodes sharing one database. SQLite
// stays the default for a single node.
//
// Opening. Open(ctx, dsn) returns the process's one *Store for that DSN:
// concurrent and repeated Opens of DSNs that normalize alike (same user,
// hosts, database and session parameters; see Store.Key) share it
// (reference-counted; each Open needs one Close). The first Open connects
// and migrates; the others wait for it. A failed open is not remembered.
// Unshared() opens a Store of its own, as another process would.
//
//	postgres.Open(ctx, "postgres://agentstate:pw@db:5432/agentstate?sslmode=verify-full")
//	postgres.Open(ctx, "host=db dbname=agentstate user=agentstate pool_max_conns=16")
//	postgres.Open(ctx, "postgres://.../agentstate?search_path=tenant_a") // another schema
//
// Ownership. A Store has one writer connection (a pgx.Conn), used only by
// its Writer, and a pgxpool of reader connections that run with
// default_transaction_read_only=on, so a read can never write. Store.Writer
// hands the writer out once; a second call before Release is
// FAILED_PRECONDITION (ErrWriterTaken). In agentstate the writer (actors/writer)
// holds it, so each node's writer actor is that node's sole writer, and it batches
// (group commit) as with SQLite.
//
// Migrations. Schema versions are rows of schema_version. Open migrates in
// one transaction that first takes a database-wide advisory lock
// (pg_advisory_xact_lock), so processes opening at once migrate exactly
// once; the rest find the schema current.
//
// Several writers. Each node's writer is a separate connection, and their
// transactions may overlap. READ COMMITTED with explicit row locks keeps
// them correct (SERIALIZABLE would abort and retry far more often under
// group commit):
//
//   - The audit trail is one or more hash chains (chains.go), each with a
//     row in audit_chains (tail position and hash, and the prune anchor)
//     and an advisory lock. A transaction that may write audit entries locks
//     the chains it writes first (most often one: its writer's own, the
//     first free one), reads their tails, assigns positions and
//     hashes, and moves the tails before it commits. So transactions of one
//     chain take turns, and those of different chains do not; within a
//     chain positions rise in commit order and every entry chains on the
//     one committed before it. A trail has 16 chains unless the DSN's
//     audit_chains says fewer; checkpoints (checkpoint.go) commit to all
//     of their heads at once.
//   - Fencing (persistence.Activate): owner_epochs holds each session's and
//     plan's epoch. A fenced write reads its key's row FOR SHARE and compares
//     the epoch; Activate increments it with an upsert, which waits for those
//     share locks. So once an Activate committed, no write of an older epoch
//     can commit, and none can commit in between. An unfenced write (epoch 0)
//     first inserts the row with epoch 0, so that it too has a row to lock.
//   - An append locks its session row (FOR UPDATE) and checks the caller's
//     NextSequence against it; a plan write's upsert locks the plan row,
//     and its record insert checks that it continues the plan's sequence
//     (the last sequence is read only to word a refusal). The UNIQUE keys on
//     (session_id, sequence) and (plan_id, sequence) are the backstop.
//   - Locks are taken in one global order, before the batch's first
//     command (lockorder.go): the chain row, then the owner_epochs rows of
//     every session and plan the batch writes, FOR UPDATE in key order.
//     Every other row a command locks belongs to a key whose owner row the
//     transaction then holds exclusively, so two nodes' batches over the
//     same keys, in any order, take turns instead of deadlocking (which
//     the server detects only after deadlock_timeout). A deadlock that
//     still happens (a writer that does not follow the order) is broken by
//     the server, and Apply runs the aborted transaction again.
//
// Writing. Writer.Apply runs a batch in one transaction: see
// persistence.Writer for the result semantics. BEGIN, the chain lock and
// the owner locks go in one round trip (for a batch that writes no audit
// entry, so needs no chain head first, in the pipeline's first one); the
// owner rows' epochs read there are the pipelined commands' fences. Then
// it runs the batch without savepoints: consecutive appends gather in one
// set written by one statement for all their rows and session heads
// (appendset.go), session updates are pipelined (their statements queued
// with a check of each answer, see pipeline.go), and all is sent with the
// batch's audit rows, in array (unnest) INSERTs, and the chain's move, in
// one more round trip; the other commands run statement by statement. Only if a command fails on its
// own, or a pipelined check does not hold, does it roll back and run the
// batch again with one SAVEPOINT per command. A transaction that lost its
// connection before COMMIT, or that the server aborted for a deadlock, is
// run again (up to 4 attempts). COMMIT runs without the caller's
// cancellation; if its answer is lost (the connection broke), a new
// connection asks pg_xact_status for the outcome, so that an error still
// means nothing was stored. A writer connection that died is replaced.
//
// Errors. Unique violations and rejected values become the command's own
// Result.Err (ALREADY_EXISTS, FAILED_PRECONDITION, INVALID_ARGUMENT). A lost
// connection, server shutdown, read-only transaction or cancellation is
// UNAVAILABLE; disk full (53100) and out of memory are RESOURCE_EXHAUSTED;
// anything else is INTERNAL.
//
// Data. Times are unix nanoseconds (bigint): PostgreSQL's timestamps keep
// only microseconds. Ordered ids use the "C" collation, so paging order is
// byte order, as in SQLite. Text cannot hold NUL bytes in PostgreSQL: such a
// value fails its command with INVALID_ARGUMENT.
//
// Test hooks. Opens counts opens in the process, MigrationRuns the
// migrations a Store applied; SetReadOnly(true) makes every write fail with
// UNAVAILABLE until SetReadOnly(false).
package postgres
