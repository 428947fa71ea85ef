// Package journal is a Proto.Actor persistence backend on agentstate: a
// persistence.Provider and persistence.ProviderState (protoactor-go's
// persistence package, driven by persistence.Mixin) whose every write is
// an ordinary session write, so it goes through the session's actor and
// the group-commit writer like any other append, and is acknowledged only
// once committed (SQLite: WAL, synchronous=FULL).
//
//	node, _ := actors.Start(sys, store, actors.Config{})
//	j := journal.New(node.Sessions(), journal.Config{SnapshotInterval: 100})
//	props := actor.PropsFromProducer(newMyActor,
//		actor.WithReceiverMiddleware(persistence.Using(j)))
//
// In a process without the node, OverGRPC makes the same Sessions of a
// gRPC client (node/client.Dial): the writes still commit in the node's
// writer, and the errors keep their codes across the wire.
//
// # What is stored where
//
// Each persistent actor's journal is one session, named by a client key in
// Config.Namespace (default "protoactor"); the session's actor_name is the
// same key. The key is the actor's name (context.Self().Id) when the name
// is 1-256 bytes of UTF-8 without a NUL and does not have the hashed form;
// any other name (empty, longer, not UTF-8, holding a NUL, or itself
// "sha256:" followed by 64 lowercase hex digits) is keyed "sha256:" and the
// lowercase hex SHA-256 of the name. So no two names share a journal: a
// literal key never has the hashed form, and an actor named like another's
// hashed key gets a hash of its own. Journals stored before this rule keep
// their keys, except those of actors literally named in the hashed form,
// which such an actor no longer finds (they may as well have been another
// actor's). The session is created by the actor's first write; reads of an
// actor that never wrote find nothing and create nothing.
//
//   - Event index n is the session's message sequence n. PersistEvent at
//     index n is an append with expected_next_sequence n: if the session's
//     next sequence is not n (another writer got there first, or the actor's
//     index is stale), it is refused and nothing is stored.
//   - An event is one message: role ROLE_SYSTEM, content the standard base64
//     of the event's deterministic binary protobuf encoding, metadata_json
//     {"proto_type":"<full message name>"}. Replay resolves the name in
//     Config.Types (default protoregistry.GlobalTypes) and unmarshals the
//     bytes, so the event comes back as the same Go type. Binary rather
//     than protojson so that unknown fields survive a schema change and
//     decoding does not depend on JSON names. The content limit of the
//     sessions service (session.Config.MaxContentBytes, 1 MiB by default)
//     bounds an event to three quarters of it.
//   - The snapshot is the session's snapshot slot, holding the snapshot as
//     a google.protobuf.Any. Proto.Actor's snapshot index is the index of
//     the first event the snapshot does not cover (the Mixin replays from
//     it), so it is stored as covering sequence index-1; GetSnapshot
//     returns the index. An index past the actor's next event index, or
//     one whose events before it were partly deleted (the covered sequence
//     older than the truncation point), is refused by the session actor
//     (FAILED_PRECONDITION) and stores nothing: recovering from it would
//     resume the actor past its last event, or skip events.
//     DeleteSnapshots(n) empties the slot if its index is at most n. A
//     snapshot is at most 4 MiB encoded (agentstate's
//     persistence.MaxSnapshotBytes).
//   - DeleteEvents(n) truncates the session through sequence n: events
//     0..n are removed, later ones stay readable at their indexes, and the
//     next index never goes back. Delete only events a snapshot covers:
//     the Mixin counts the events it replays from the snapshot's index, so
//     a gap after the snapshot makes its next index wrong, and its next
//     write is then refused (above) rather than stored at a wrong index.
//
// # Failures
//
// ProviderState's methods return no error, and an actor must never go on
// as if an event was stored when it was not. So every failed call panics
// with a *Error (the operation, the actor name, the index, the cause):
// inside the actor the panic is a failure its supervisor handles, by
// default a restart, and the restarted actor's Mixin recovers from the
// store, which holds exactly what committed. The message whose write
// failed is not answered. A refused conditional append (*Error wrapping a
// FAILED_PRECONDITION; agentstate's persistence.NextSequenceOf reads the
// session's next sequence from it) stored nothing; an OUTCOME_UNKNOWN one (a deadline passed while the write was in
// flight) may have been stored, and the recovery then replays it. Failures
// on reads panic the same way (the Mixin cannot recover from a partial
// replay). A journal forgets an actor's session id when a call for it
// fails, so the recovery looks it up afresh.
//
// Each call waits for its write (Config.Timeout, default 30 s), blocking
// the actor's goroutine, as every Proto.Actor persistence provider does;
// many actors persisting at once share the writer's transactions.
//
// # Using the pinned persistence.Mixin
//
// GetSnapshotInterval returns Config.SnapshotInterval as given; the Mixin
// takes the event index modulo it, so give it a positive interval. The
// Mixin asks for a snapshot (RequestSnapshot) inside PersistReceive, before
// the actor applies the event it is persisting, and stores it at that
// event's index: so apply an event after PersistReceive returns, and the
// snapshot covers exactly the events before its index. That nested
// delivery also leaves the context without a sender: take ctx.Sender()
// before calling PersistReceive if the actor answers after it.
package journal
