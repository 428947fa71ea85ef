// Package session owns conversation sessions: one actor per session, which
// alone writes that session; its message sequences are decided by one
// function, persistence's AppendMessages.DecideSequence.
//
// # Embedding
//
//	store, _ := sqlite.Open("file:./data/agentstate.db")
//	wr, _ := writer.Start(sys, store, writer.Config{})
//	sessions, _ := session.Start(sys, wr, store.Reader(), session.Config{})
//	defer sessions.Stop(ctx) // before wr.Stop: its writes drain first
//	resp, err := sessions.Append(ctx, &sessionv1.AppendRequest{...})
//
// *Service implements sessionv1.SessionServiceServer, so the gRPC server
// registers it as is. Remote Proto.Actor senders send the same bare
// sessionv1 requests to PID() (the directory, named "sessions") and get the
// response message or a *commonv1.Error.
//
// Start spawns a sessions directory (actors/directory). It spawns the actor
// of a session on the first request for its id; later writes reach the live
// actor directly (directory.LiveOwners) or through the directory. The
// actor is the owner kernel (actors/lifecycle) with this package's session
// domain (owner.go) in the directory's actor shell. An actor that received
// nothing for about Config.IdleTimeout (default 5 minutes; its own idle
// timer ticks once per timeout) asks to passivate; it stops once its writes in flight
// are answered, and the directory spawns a fresh one for the next request,
// which reloads the session from the store (next sequence = stored maximum
// + 1), or, for a plain append, has it decided on the head the store reads
// inside the write (below, Fencing). PassivateAll forces that for every actor. The actor takes its
// identity only from the key it was spawned with, so the same code can run
// as a Proto.Actor cluster kind keyed by the grain identity.
//
// # The path of one append
//
//  1. Service.Append (caller's goroutine): validate the session id, each
//     message's role, content size and UTF-8, metadata (a JSON object,
//     compacted) and message id (a ULID; a new one when absent); refuse a
//     message id given twice. Nothing invalid gets further.
//  2. Take a writer backlog slot: in-process callers wait for one, network
//     callers (writer.NoWait contexts) get RESOURCE_EXHAUSTED when full.
//  3. The request goes to the session's live actor, or through the
//     directory, which spawns it.
//  4. The actor's kernel queues it. With no write in flight it cuts the
//     leading run of queued appends and the domain (startAppends) makes
//     them, one Turn each, one persistence.AppendMessages decided at the
//     next sequence (AppendMessages.DecideSequence), which goes to the writer
//     actor, which group commits it with other sessions' writes. A cold
//     actor's first run is carried by its activation and decided by the
//     same function inside the store (see Fencing).
//  5. On *writer.Applied (after COMMIT; with synchronous=FULL: durable) the
//     actor answers each request with its message ids, sequences and
//     timestamps, in sequence order, moves its next sequence to
//     the AppendResult's NextSequence and starts the next write.
//
// Reads (Get, List, ListMessages, Export) go to the store's read-only
// connections, not through the actor: a write is answered only after it
// committed, so reads see every acknowledged write.
//
// # Invariants and who keeps them
//
//   - Sequences are 0-based, dense, unique per session and in
//     acknowledgement order: only the session's actor assigns them, with at
//     most one write in flight, and it advances its next sequence only on a
//     committed result. A failed write fails exactly the requests it
//     carried and leaves the next sequence at last committed + 1. The
//     store's UNIQUE(session_id, sequence) is a backstop: a conflict makes
//     the actor reload rather than guess.
//   - A turn (the messages of one append) is stored whole or not at all:
//     it is one Turn inside one transaction.
//   - Idempotent retry: a turn whose message ids are all stored in the
//     session, as the same turn (same ids in the same order, same role,
//     content and metadata), is answered with the stored sequences and
//     timestamps (duplicate = true) and stores nothing; a stored id reused
//     otherwise is ALREADY_EXISTS naming it, and nothing is stored. The store checks this inside
//     the writer's transaction, so it holds for a retry queued behind, or
//     coalesced with, its original, and after passivation.
//   - Requests to one session are decided in arrival order: appends queued
//     behind a close are refused; non-append writes (create, close, token
//     usage, link, delete) go one at a time.
//   - Close refuses appends only (FAILED_PRECONDITION); token usage and
//     plan links are still accepted, so late accounting is not lost.
//   - At most one actor per session is alive (the directory's invariant),
//     so a reactivated actor's reload sees every write of its predecessor.
//     Where two directories (two processes, two cluster members) each
//     activate one, fencing keeps only the newer one writing (below).
//
// # Fencing
//
// A session actor's first write is persistence.Activate: the store
// increments the session's epoch and returns it. The actor's first request
// rides in it when it can (a create, decided with no load: the store
// refuses it when the session exists; a plain append, decided blind on the
// head the store reads after taking the epoch; a conditional append,
// decided on a load and applied only while the session stands as loaded);
// otherwise the actor loads the session once the activation committed and
// decides then. Every later write carries the epoch, and
// the store refuses a write whose epoch is not the current one with
// persistence.ErrFenced, storing nothing. So of two activations only the
// newer can write, and its load saw everything the older one committed.
//
// A fenced actor answers the requests of the refused write, every queued
// request and every later arrival with UNAVAILABLE ("session X is owned by
// a newer activation; retry") and asks its directory to stop it. The
// caller's retry (through either directory) reaches the current owner or
// spawns a fresh actor, which activates anew. Retries are safe: the fenced
// write stored nothing, and message ids make appends idempotent. Import
// writes its brand-new session unfenced (epoch 0), which the store accepts
// only for an id nobody ever activated. Config.Name lets two Services share
// one actor system, which is how the tests force a double activation.
//
// # Export and import
//
// Export is canonical JSON (SchemaVersion, the session, its messages in
// sequence order, its plan links) plus checksum "sha256:<hex>" over the
// canonical form without the checksum. Import verifies version and
// checksum (prefixed or bare hex), validates every field as the live calls
// would, and creates a new, active session with the same messages (ids,
// order, timestamps), token totals and plan links, in one transaction.
package session
