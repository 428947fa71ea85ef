// Package plan owns plans' error histories: one actor per plan records the
// plan's errors, counts retries per step, classifies each error and advises
// a recovery, and persists all of it through the writer actor.
//
// # Use
//
//	svc, err := plan.Start(sys, wr, store.Reader(), plan.Config{})
//	rec, err := svc.RecordError(ctx, &planv1.RecordErrorRequest{PlanId: id,
//		Phase: planv1.Phase_PHASE_EXECUTE, StepId: "s1", ErrorType: "TimeoutError"})
//	// rec.Record.RecoveryAction == RETRY, rec.Record.Sequence == 0
//
// *Service implements planv1.PlanServiceServer. Remote senders send the
// bare planv1 requests to svc.PID(), the "plans" directory.
//
// # Ownership and invariants
//
// The original service kept each plan's history in a dict filled by an
// unsynchronized get-or-create, so two concurrent first errors of a plan
// could each create a history and one record was lost; and the history
// lived only in memory. Here the directory (actors/directory) is the only
// get-or-create: it spawns at most one actor per plan id. That actor alone
// assigns the plan's sequences and changes its retry counters, policy and
// error_details, so:
//
//   - sequences are 0-based and dense per plan, in arrival order, and no
//     record is lost: each is assigned when the request is processed, and a
//     failed write gives its sequences back (see below);
//   - a request is answered only after the transaction carrying it
//     committed (durable with synchronous=FULL), so every acknowledged
//     record is in History, which reads the store, and survives
//     passivation: a new actor reloads the plan (persistence.Reader.GetPlan;
//     NOT_FOUND is a fresh plan with max_retries 3);
//   - at most one PlanWrite per plan is in flight; requests arriving
//     meanwhile are coalesced into the next one, each record with its
//     plan_error_recorded audit entry, the step counters it changed and the
//     merged error_details, all in one transaction;
//   - when a write fails (disk full, I/O), exactly the requests it carried
//     fail with its error, nothing of them is stored, and the actor rolls
//     back to its last committed state and recomputes the queued requests,
//     so the next record gets the next dense sequence. A write answered
//     OUTCOME_UNKNOWN (it may have committed) or FAILED_PRECONDITION (the
//     store disagrees) makes the actor reload the plan instead, so that a
//     write which did commit is counted and the next one does not conflict
//     with it.
//
// # Idempotent retry
//
// A RecordError may name its record: record_id, a ULID the client makes.
// A retry with the same record_id for the same plan is answered with the
// stored original (duplicate = true: its sequence, retry_count, recovery
// advice and recorded_at) and changes nothing: no second record, no
// counter or sequence bumped, no audit entry. The retry's other fields are
// not compared. The same record_id for another plan is ALREADY_EXISTS.
// The actor answers retries it knows itself: one of a request still
// unanswered waits for that request's outcome (and fails with it: nothing
// was stored), one of a recently committed record is answered at once. The
// store is the truth for the rest: a PlanWrite carrying a stored record id
// fails whole with a *persistence.RecordsExistError naming the stored
// records, inside the writer's transaction; the actor answers those
// requests from it and resends the others, recomputed. So a retry is safe
// after passivation, after a cluster move and after a failed-over node,
// and a client that got no answer (a timeout, OUTCOME_UNKNOWN, UNAVAILABLE
// from a router) retries with the same record_id. Without a record_id the
// actor makes one, and such a retry may record the error twice.
//
// # Fencing
//
// The directory's "one actor per plan" holds within one process. Where two
// directories (two processes, two cluster members) each activate one, the
// store keeps only the newer writing: an actor's first write is
// persistence.Activate, which increments the plan's epoch and returns it;
// only after that commits does the actor load the plan (calls that arrive
// meanwhile wait, in order), and every PlanWrite carries the epoch. The
// store refuses a write of an older epoch with persistence.ErrFenced and
// stores nothing of it. The fenced actor answers the requests of that
// write, the queued ones and every later one with UNAVAILABLE ("plan X is
// owned by a newer activation; retry") and asks its directory to stop it;
// a retry, through either directory, reaches the current owner or a fresh
// actor with a new epoch, whose load includes every acknowledged record.
// A failed activation (disk full, no writer) fails the waiting calls with
// its error and stops the actor the same way. Config.Name lets two Services
// share one actor system, which is how the tests force a double activation.
//
// Back-pressure: every write request holds a writer Backlog slot until it
// is answered (in-process callers wait, writer.NoWait contexts and remote
// senders get RESOURCE_EXHAUSTED); a plan actor's Submits are covered by the
// slots of the requests they carry.
//
// # Classification
//
// Classify maps (error_type, message) to a category: the normalized
// error_type (NormalizeErrorType: last component of a qualified name,
// lower-case, letters and digits only, "Error"/"Exception" suffix dropped)
// is looked up in the table; if absent, the first row (in the order below)
// with a pattern contained in the lower-cased message wins; otherwise
// UNKNOWN. Table() returns every row with its types and patterns.
//
//	category             retriable  default action         command
//	transient            yes        retry                  node plan details --plan <plan_id>
//	auth                 no         prompt                 node plan history --plan <plan_id>
//	merge_conflict       no         revert_to_strategize   node plan details --plan <plan_id>
//	resource             no         revert_to_strategize   node plan details --plan <plan_id>
//	strategy_constraint  no         revert_to_strategize   node plan details --plan <plan_id>
//	validation           no         prompt                 node plan history --plan <plan_id>
//	internal             no         abort                  node plan history --plan <plan_id>
//	tool                 yes        retry                  node plan details --plan <plan_id>
//	unknown              no         escalate               node plan history --plan <plan_id>
//
// Transient errors (timeout, rate_limit, network, unavailable) and tool
// failures are retried; the rest need a changed strategy (revert), a human
// input (prompt), or a human decision (escalate, abort). Hints and commands
// are fixed per category and name the plan. The actions are the caller's
// (agentstate does not run plans); a command is this project's CLI command
// that shows what the advice rests on.
//
// # Decision rule
//
// retry_count is the number of errors recorded for (plan, phase, step)
// since the step's last RecordSuccess, this one included, whatever their
// category. With max_retries the plan's policy (0..100, default 3):
//
//	retriable and retry_count <= max_retries  → retry
//	retriable and retry_count >  max_retries  → escalate ("retries exhausted")
//	not retriable                             → the category's default action
//
// So max_retries 0 escalates the first retriable error, and max_retries 3
// allows three retries and escalates the fourth error of a step. The record's
// is_retriable is the category's, whether or not it is retried this time.
//
// # error_details
//
// A plan's error_details object has two owners. The plan actor owns eight
// keys (error_category, error_phase, retry_count, max_retries,
// is_retriable, recovery_action, recovery_hint, recovery_command), which
// every recorded error rewrites; MergeErrorDetails adds or replaces any
// other top-level key and refuses the eight. Neither ever removes the
// other's keys.
//
// # Input
//
// plan_id: 1..128 bytes of [A-Za-z0-9._:-] (plans are created by another
// system, so a ULID is accepted but not required). record_id: empty or a
// canonical ULID (26 upper-case Crockford base32). phase: one of the four.
// step_id (may be empty: the phase itself), error_type (required), tool,
// actor_name: at most 256 bytes of UTF-8 without control characters.
// message, stack_summary, attributes_json (a JSON object): at most
// Config.MaxMessageBytes. max_retries: 0..100. Anything else is
// INVALID_ARGUMENT, and nothing of the request is stored.
package plan
