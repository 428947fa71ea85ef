// Package writer owns agentstate's only database writer: the group-commit
// writer actor.
//
// # Ownership
//
// Start takes the store's sole persistence.Writer and gives it to one
// actor, the writer. Every state change in agentstate reaches the database
// through it: the session and plan owners (actors/directory's shell around
// a lifecycle kernel) send it *Submit, one write in flight each (their
// activations, creates, appends, updates, truncations, snapshots, deletes
// and plan writes); the audit trail
// (actors/audit) hands it records, prunes and flushes through Apply,
// ApplyRecord, Enqueue and Flush. Nothing else can write: the store hands
// out one Writer, and readers use the store's read-only connections,
// never the writer's. The writer's actor is local to its process: it is
// never exposed to remote senders.
//
// # Group commit
//
// The actor keeps a queue. When no transaction runs, it takes everything
// queued, in arrival order, up to Config.MaxBatchCommands commands and
// Config.MaxBatchBytes bytes, and applies it with one Writer.Apply — one
// transaction — on a long-lived goroutine of its own, so it keeps
// receiving while the transaction runs and the next batch forms meanwhile.
// Stand-alone records in a batch (those whose Command.Touches says
// AuditRecords or AuditClientRecords) are merged into one command of each
// kind. At most one Apply runs at a time. After a commit, Config.OnCommit
// (the live feeds' hook) sees the transaction's commands; then every
// sender in the batch is answered with its own result: a *Submit's sender gets *Applied,
// in-process callers their return value. With synchronous=FULL, answered
// means durable. Commands of one sender commit in the order it sent them.
//
// After a commit, the next transaction may wait a little for the senders
// the commit answered: they typically send their next command at once, and
// a transaction that starts without them carries only half of the load and
// pays a whole fsync for it. The wait ends as soon as as many commands are
// queued as the writer expects (the last transaction's plus those queued
// when it committed), and lasts at most Config.CommitWindow: about as long
// as the last transaction took, longer when the senders were seen to come
// back more slowly (over gRPC); a lone sender never waits.
//
// A transaction that rolls back (I/O error, disk full, read-only file) is
// answered with a typed error to every command in it: nothing of it is
// stored. The actor pauses (Config.RetryBackoff, doubling to
// MaxRetryBackoff), then goes on serving; it succeeds again once the cause
// is gone. Nothing answered as committed is ever lost.
//
// # Async records
//
// Enqueue answers at acceptance. An accepted record is stored exactly
// once unless the process dies before its commit, or Stop's deadline
// abandons the drain (Stop then reports how many were lost). When its
// transaction rolls back, it is not dropped: it goes back to the front of
// the queue and rides in the next transaction, however many attempts that
// takes (Observer.AsyncRetried counts these). Flush returns once
// everything accepted before it committed.
//
// # Back-pressure
//
// At most Config.Backlog (default 10,000) commands are pending, carrying
// at most Config.BacklogBytes (default 64 MiB). Senders take a Backlog
// slot and their command's size before handing it over and give them back
// once it is answered (an async record: once it committed). With every slot
// taken, in-process senders wait in Acquire (until their context ends:
// UNAVAILABLE), and network senders — contexts marked with NoWait, which
// the gRPC server and the remote endpoint set — get RESOURCE_EXHAUSTED at
// once.
//
// # Stopping
//
// Stop refuses new work with UNAVAILABLE, drains everything accepted
// before it, and releases the persistence.Writer. Afterwards every
// request is answered UNAVAILABLE.
package writer
