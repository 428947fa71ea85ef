package persistence

import (
	"context"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// Store is one database.
type Store interface {
	// Writer hands out the store's sole writer. While a Writer is held
	// (until its Release), further calls fail with FAILED_PRECONDITION
	// (ErrWriterTaken): there is never a second writer, and a reader can
	// never obtain the writer's connection.
	Writer() (Writer, error)
	// Reader returns the read side. It is safe for concurrent use, runs on
	// read-only connections, and sees every transaction committed before
	// the call started.
	Reader() Reader
	// SetQuotas makes q the namespaces' quotas (Quotas; nil: the
	// defaults) from the writer's next transaction on. They are the
	// database's: every handle of it in the process shares them.
	SetQuotas(q Quotas)
	// Close releases this handle. Implementations that share one database
	// among handles close it when the last handle is closed.
	Close() error
}

// Writer applies write commands. It is not safe for concurrent use: its
// owner (actors/writer) calls Apply from one goroutine at a time.
type Writer interface {
	// Apply applies batch, in order, in one transaction, and returns one
	// Result per command (results[i] belongs to batch[i]).
	//
	// A non-nil error means the transaction rolled back: nothing of the
	// batch is stored, and results is nil. Otherwise each command either
	// committed (Result.Err == nil) or was rolled back on its own
	// (Result.Err != nil) while the others committed.
	//
	// Apply fills in the fields that are assigned at commit: the Position,
	// PrevHash and Hash of every audit entry (in batch order, chaining on
	// the last committed entry), and the Sequence and CreatedAt of stored
	// messages are returned in TurnResult.
	Apply(ctx context.Context, batch []Command) ([]Result, error)
	// Release gives the writer back to its Store. The Writer must not be
	// used afterwards.
	Release()
}

// Command is one write. The concrete types below are the only commands.
type Command interface {
	// Size estimates the bytes the command writes, to bound batches.
	Size() int
	// Fence names the owner the command writes for and its epoch.
	Fence() Fence
	// Touches reports what the command writes (Touch): the session, the
	// plan, the audit effect, the message rows, what its own statements
	// check and the key it activates. A wrapper reports what it wraps.
	Touches() Touch
	// applyTo is Dispatch's double dispatch; unexported, it keeps the set
	// of commands closed.
	applyTo(Handler) (Result, error)
}

// CreateSession inserts a session, its initial messages (an import brings
// them; sequences 0..n-1 in order) and its audit entries.
// Result.Err is ALREADY_EXISTS when the session id is taken.
type CreateSession struct {
	// Epoch fences the write (see Activate); 0 = unfenced.
	Epoch    int64
	Session  *sessionv1.Session
	Messages []*sessionv1.Message
	Audit    []*auditv1.AuditEntry
	// State is the session's initial state (a JSON object; "" = "{}"),
	// and Scopes the shared scopes' deltas stored with it. Snapshot, when
	// set, fills the snapshot slot (an import brings it).
	State    string
	Scopes   []ScopeDelta
	Snapshot *sessionv1.Snapshot
}

// AppendMessages appends turns to one session. Its NextSequence and State are
// decided by DecideSequence, from the session's head: the one its warm owner
// holds, or the one the store read for a cold owner's blind append
// (Activate). Apply assigns NextSequence, NextSequence+1, ... to the new
// messages in turn order, skipping duplicate turns, and reports the next
// sequence after the command in its ResultOf (an AppendResult).
//
// Per turn (TurnResult):
//   - every message id already stored in the session, as a retry of the
//     same turn (CheckRetry: same ids in the same order, same role,
//     content and metadata): Duplicate = true, Messages are the stored
//     originals, nothing is written (not even the turn's audit entries);
//   - every id stored but not as that turn, or some but not all stored:
//     Err is ALREADY_EXISTS naming a stored id (MessageIDTaken), nothing
//     written;
//   - none stored: the turn's messages and audit entries are inserted.
//
// Item keys are resolved first (ResolveKeys): a key a stored message of
// another id holds fails the turn (ALREADY_EXISTS naming it), or, for a
// message with KeepStored, drops it for the stored one (TurnResult.Kept),
// and the rules above apply to the messages left, which take the
// sequences.
//
// A sequence that is already taken (a stale NextSequence) fails the whole
// command with FAILED_PRECONDITION: the UNIQUE(session_id, sequence)
// constraint is the backstop. A missing session is NOT_FOUND.
//
// A turn may carry a state delta and scope deltas (and then may have no
// message). They are applied only for a turn that is stored (not for a
// duplicate, nor a failed turn): the session's state from State, the
// session's committed state as its owner knows it, turn after turn
// (ApplyDelta), and written with the session row; each scope read and
// rewritten inside the transaction. AppendResult.State is the state after the
// command ("" when no stored turn changed it). A delta that would make a
// state too large fails its turn (INVALID_ARGUMENT), storing nothing of it.
type AppendMessages struct {
	// Epoch fences the write (see Activate); 0 = unfenced.
	Epoch        int64
	SessionID    string
	NextSequence int64
	// State is the session's committed state (see above); "" = "{}".
	State string
	Turns []Turn
	// UpdatedAt becomes the session's updated_at when a turn is stored.
	UpdatedAt time.Time
}

// DecideSequence decides c against head, the session as its owner knows it:
// the turns are numbered from head.NextSequence on and their deltas apply to
// head.State. It is the one place a session's next sequence is decided, for a
// warm owner (the session actor, from what it loaded and committed since) and
// for a cold owner's blind append (ApplyActivate, from the head the store
// read after taking the epoch). The store commits the decision or, when the
// sequence is taken since, refuses the command whole.
func (c *AppendMessages) DecideSequence(head SessionHead) {
	c.NextSequence, c.State = head.NextSequence, head.State
}

// Turn is one atomic group of messages. Message.Sequence is ignored on
// input; SessionID is taken from the command; MessageId and CreatedAt must
// be set.
type Turn struct {
	Messages []*sessionv1.Message
	// KeepStored[i] (nil = all false) says message i, whose item key a
	// stored message of another id holds, is dropped for that message
	// (KEY_CONFLICT_KEEP_STORED) instead of failing the turn (ResolveKeys).
	KeepStored []bool
	// When Audit holds one entry per message, in message order, a kept
	// message's entry is dropped with it.
	Audit []*auditv1.AuditEntry
	// Normalized (NormalizeDelta) deltas; nil/empty when none.
	State  *sessionv1.StateDelta
	Scopes []ScopeDelta
}

// HasDelta reports whether the turn changes a state.
func (t *Turn) HasDelta() bool { return t.State != nil || len(t.Scopes) > 0 }

// Check is the turn's own validation, the same for every store: a turn
// stores messages or changes a state, its messages' times can be stored
// exactly, no message id or item key appears twice in it, and keys and
// kinds are well formed (CheckItemKey, CheckKind). Its error is the turn's
// (INVALID_ARGUMENT): the turn fails, the rest of the command does not.
func (t *Turn) Check(sessionID string) error {
	if len(t.Messages) == 0 && !t.HasDelta() {
		return errs.InvalidArgument("session %s: empty turn", sessionID)
	}
	for i, m := range t.Messages {
		if _, err := MessageNanos(m); err != nil {
			return err
		}
		for _, o := range t.Messages[:i] {
			if o.MessageId == m.MessageId {
				return errs.InvalidArgument("session %s: message id %s appears twice in one turn", sessionID, m.MessageId)
			}
		}
	}
	return t.checkKeys(sessionID)
}

// UpdateSession changes a session's mutable fields. Zero fields are left
// alone. Result.Err is NOT_FOUND when the session does not exist.
type UpdateSession struct {
	// Epoch fences the write (see Activate); 0 = unfenced.
	Epoch     int64
	SessionID string
	// SESSION_STATE_UNSPECIFIED leaves the state alone.
	State    sessionv1.SessionState
	ClosedAt time.Time
	// Added to the stored totals.
	TokenDelta *sessionv1.TokenUsage
	// Inserted, or replaced when a link with its plan_id exists.
	LinkPlan  *sessionv1.LinkedPlan
	UpdatedAt time.Time
	Audit     []*auditv1.AuditEntry
	// SetExpiry sets expires_at to ExpiresAt (the zero time clears it).
	SetExpiry bool
	ExpiresAt time.Time
}

// DeleteSession removes a session and its messages; plan links go, plans
// stay. Its ResultOf (a DeleteResult) reports what went.
// Result.Err is NOT_FOUND when the session does not exist.
type DeleteSession struct {
	// Epoch fences the write (see Activate); 0 = unfenced.
	Epoch     int64
	SessionID string
	Audit     []*auditv1.AuditEntry
	// Limit, when positive, bounds the messages one command removes, for
	// removing a large staged session (SessionStateStaged) in bounded
	// transactions: the command removes at most Limit messages and, only
	// once none is left, the links and the session. MessagesRemoved <
	// Limit means the session is gone. Only for staged sessions: a visible
	// one would be seen half removed.
	Limit int
}

// PlanWrite stores a plan actor's changes; the plan row is created on the
// first write (with max_retries 3 unless MaxRetries is set).
type PlanWrite struct {
	// Epoch fences the write (see Activate); 0 = unfenced.
	Epoch int64
	// The plan is (Namespace, PlanID); "" is DefaultNamespace.
	Namespace string
	PlanID    string
	// nil leaves the policy alone.
	MaxRetries *int32
	// Sequences are assigned by the plan actor and must continue the
	// plan's dense sequence; a taken sequence fails the command with
	// FAILED_PRECONDITION. Record ids must be distinct within the command
	// (INVALID_ARGUMENT otherwise); a record id stored already, for this
	// plan or another, fails the command with a *RecordsExistError. A
	// record's namespace is the write's.
	Records []*planv1.ErrorRecord
	// Upserted step counters.
	StepRetries []StepRetry
	// The whole merged error_details object; "" leaves it alone.
	ErrorDetailsJSON string
	Audit            []*auditv1.AuditEntry
}

// RecordsExistError is PlanWrite's command-level failure when record ids of
// the command are stored already. Nothing of the command was stored. It
// wraps an ALREADY_EXISTS *errs.Error (errors.As finds both). Stored holds,
// for each such id, the stored record: one of this plan is a retry's
// original, to be answered as is (a retry must not be recorded again, nor
// bump a counter or a sequence); one of another plan (its Namespace or
// PlanId says so)
// is a conflict. The writer checks this inside its transaction, so it
// holds however the plan's actors came and went.
type RecordsExistError struct {
	PlanID string
	Stored []*planv1.ErrorRecord
}

func (e *RecordsExistError) Error() string { return e.Unwrap().Error() }

// Unwrap returns the ALREADY_EXISTS error naming the first stored id.
func (e *RecordsExistError) Unwrap() error {
	first := ""
	if len(e.Stored) > 0 {
		first = e.Stored[0].GetRecordId()
	}
	return errs.AlreadyExists("plan %s: %d error record id(s) of the write are stored already (first %s)", e.PlanID, len(e.Stored), first)
}

// StepRetry is the retry counter of one plan step.
type StepRetry struct {
	Phase  planv1.Phase
	StepID string
	Count  int32
}

// RecordAudit appends audit entries on their own.
type RecordAudit struct {
	Entries []*auditv1.AuditEntry
}

// PruneAudit deletes at most Limit of the oldest entries created before
// OlderThan, in commit order, and keeps the remaining chain verifiable
// (it records the last removed entry's hash as the chain's anchor).
// Its ResultOf says how many went; fewer than Limit means done.
type PruneAudit struct {
	OlderThan time.Time
	Limit     int
	Audit     []*auditv1.AuditEntry
}

// Result is the outcome of one command.
type Result struct {
	// Non-nil when this command was rolled back on its own.
	Err error
	// Activate: the new epoch.
	Epoch int64
	// Activate carrying a blind append: the session as the store read it
	// before the append (see Activate).
	Head *SessionHead
	// The outcome of the command (an AppendMessages, a DeleteSession, a
	// PruneAudit, a TruncateSession, a PutSnapshot or a RecordClientAudit),
	// set by the typed setters and read through the command's ResultOf. A
	// struct, not an interface, so that carrying it allocates nothing.
	own outcome
}

// TurnResult is the outcome of one turn of an AppendMessages.
type TurnResult struct {
	Err       error
	Duplicate bool
	// The stored messages, with their sequence and created_at, in turn
	// order.
	Messages []*sessionv1.Message
	// Kept[i] (nil = all false): Messages[i] is the stored message that
	// holds the turn's message i's item key, kept in its place
	// (Turn.KeepStored); it consumed no sequence.
	Kept []bool
}

// IsKept reports whether message i of the turn was kept (TurnResult.Kept).
func (r *TurnResult) IsKept(i int) bool { return r.Kept != nil && r.Kept[i] }
