// Package persistence is the storage contract of agentstate: the write
// commands the writer (actors/writer) applies, the reads everyone else may
// run, and the errors each returns. Implementations live in sub-packages
// (sqlite, postgres), which share what their dialects do alike through
// sqlstore; every implementation must pass the conformance harness in
// storetest.
//
// Commands. Each says what it writes through Command.Touches (touch.go):
// the session, the plan, the audit chain; the writer, the feed hub and the
// stores (whether to lock the chain's tail) ask that. Handler and Dispatch
// are the one place that tells the commands apart, for the stores.
//
// Ownership. A Store has exactly one Writer at a time. In agentstate the
// writer holds it for the life of the process and is therefore the only
// code that changes the database; everything else reads through Reader, whose
// connections are read-only and never the writer's.
//
// Atomicity. Writer.Apply takes an ordered batch of commands and applies it
// in one transaction. A transaction-level failure (I/O error, disk full,
// read-only file) rolls back the whole batch and is returned as the error;
// then nothing of the batch is stored. Otherwise every command has its own
// Result: a command that fails on its own (a missing session, a sequence
// conflict) is rolled back alone and reports Result.Err; the others commit.
// A duplicate message id is a result (TurnResult.Duplicate), not a failure.
//
// Errors are *errs.Error: NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION,
// INVALID_ARGUMENT for command-level failures; RESOURCE_EXHAUSTED (disk or
// page limit full), UNAVAILABLE (read-only, I/O, busy) and INTERNAL for
// transaction-level ones.
package persistence
