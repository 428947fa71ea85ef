// Package audit owns agentstate's audit trail: the tamper-evident,
// hash-chained record of every change, and the AuditService API in front
// of it.
//
// # Ownership
//
// The trail is a domain like sessions and plans: it writes through the
// node's group-commit writer (actors/writer), and reads (List, Count, Get,
// Verify) on the store's read-only connections. Session and plan actors
// commit their entries (made with NewEntry) together with their own state
// changes in one command; Record adds stand-alone entries, Prune removes
// old ones. Start spawns the audit actor (named "audit"), which serves the
// bare auditv1 requests of remote senders, marked writer.NoWait.
//
// # Records: async and sync
//
// Record (and NewEntry, which session and plan actors use for the entries
// they commit with their own state changes) checks event_type against the
// registry (EventTypes; unknown is INVALID_ARGUMENT), normalizes
// details_json to a JSON object and masks every secret in it (IsSecretKey:
// password, secret, token, api_key, authorization, ... at any depth,
// case-insensitive) before anything is stored, and assigns a ULID event_id
// and created_at when the entry is accepted.
//
//   - sync (RecordRequest.Sync): answered after the entry's transaction
//     committed; durable=true. A failed transaction is the caller's error.
//   - async: answered at acceptance with durable=false; the entry commits
//     in the next transaction (writer.Writer.Enqueue, which states the
//     guarantee: stored exactly once unless the process dies first or the
//     writer's Stop abandons its drain; a rolled-back transaction requeues
//     it). Flush returns once everything accepted before it committed.
//
// # Back-pressure
//
// Records, prunes and flushes take the writer's Backlog like every other
// write: in-process senders wait, network senders (writer.NoWait) get
// RESOURCE_EXHAUSTED when it is full.
//
// # Tamper evidence, verify and prune
//
// The store chains every entry at commit: hash = SHA-256(previous hash ‖
// canonical entry) (persistence.AuditHash). Verify walks the chain from
// its anchor and reports the first broken link. There is no update path;
// Prune is the only delete: it removes the oldest entries in chunks of
// Config.PruneChunk, each its own transaction through the same queue (so
// other writes interleave), each committed with an audit_pruned entry, and
// the store keeps the last removed hash as the anchor, so what remains
// verifies from its first entry.
package audit
