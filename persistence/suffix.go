package persistence

import (
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// ReplaceSuffix (issue 30) removes a session's messages with sequence >=
// From and stores Turn's messages from From on, in one command: after it
// the history is dense again and continues at From. Like an append it is
// decided by the session's owner (DecideSequence: the head's next
// sequence and state), and the store refuses it whole when the session no
// longer stands at that head.
//
// Expected is the client's expected next sequence. From is the request's
// from_sequence, or Expected - remove_last: so it names the same cut on a
// retry as on the original. The store (ApplyReplaceSuffix) decides:
//   - Turn has messages and the session ends with exactly them from From
//     on (the ids in order, the same content: CheckRetry): a retry of a stored
//     replacement, or a replacement that would change nothing: Duplicate,
//     nothing written;
//   - else the next sequence is not Expected: a *SequenceMismatchError;
//   - else the messages from From are removed (at most MaxSuffixRemoved of
//     them, MaxSuffixRemovedBytes of payload), the snapshot slot emptied if
//     its snapshot covers one of them, Turn stored from From as an
//     append's turn (its deltas, its audit entries), Audit appended.
//
// A new message's id may be one the command removes, or one an earlier
// replacement removed (removedids.go), only if it keeps its content
// (role, content, metadata); any other stored id is ALREADY_EXISTS. A closed session is FAILED_PRECONDITION, a missing one
// NOT_FOUND.
type ReplaceSuffix struct {
	Epoch     int64
	SessionID string
	From      int64
	Expected  int64
	// NextSequence and State are the head the owner decided on.
	NextSequence int64
	State        string
	// Turn's messages and deltas are stored after the removal; it may be
	// empty (a pure removal).
	Turn      Turn
	UpdatedAt time.Time
	// Audit is the replacement's own entries (session.rewound), written
	// unless it is a duplicate.
	Audit []*auditv1.AuditEntry
}

// Bounds of what one ReplaceSuffix removes: its response carries the
// removed messages, which must fit in what a default gRPC client receives.
const (
	MaxSuffixRemoved      = 1000
	MaxSuffixRemovedBytes = 3 * MaxPageBytes
)

// DecideSequence decides c against head, as AppendMessages.DecideSequence
// does.
func (c *ReplaceSuffix) DecideSequence(head SessionHead) {
	c.NextSequence, c.State = head.NextSequence, head.State
}

// SuffixResult is the outcome of a ReplaceSuffix.
type SuffixResult struct {
	// Removed are the removed messages, in sequence order (none for a
	// duplicate).
	Removed []*sessionv1.Message
	// Messages are the stored messages of Turn, in its order; Kept[i]
	// (nil = all false) says Messages[i] is a stored message that held
	// the new one's item key (KEY_CONFLICT_KEEP_STORED).
	Messages     []*sessionv1.Message
	Kept         []bool
	NextSequence int64
	// State is the session's state after the command; "" when unchanged.
	State     string
	Duplicate bool
	// Rewind is the cut the command made (zero for a duplicate).
	Rewind Rewind
}

// Result returns a Result carrying x.
func (x SuffixResult) Result() Result { var r Result; r.own.suffix = &x; return r }

// ResultOf returns the outcome r carries of c.
func (c *ReplaceSuffix) ResultOf(r Result) SuffixResult {
	if r.own.suffix == nil {
		return SuffixResult{}
	}
	return *r.own.suffix
}

// Rewind is what a committed ReplaceSuffix tells those that watch a
// session: the messages from From on, of the Previous next sequence, are
// no longer current. A duplicate commits no rewind.
type Rewind struct {
	From, Previous int64
}

// Rewound reports the rewind the command of r committed, if any: only a
// stored ReplaceSuffix (wrapped or not) has one. The feed hub asks every
// committed result, so it tells no command apart.
func (r Result) Rewound() (Rewind, bool) {
	s := r.own.suffix
	if r.Err != nil || s == nil || s.Duplicate {
		return Rewind{}, false
	}
	return s.Rewind, true
}

func (c *ReplaceSuffix) Size() int {
	n := rowOverhead + auditSize(c.Audit) + auditSize(c.Turn.Audit)
	for _, m := range c.Turn.Messages {
		n += rowOverhead + len(m.GetContent()) + len(m.GetMetadataJson())
	}
	return n
}

func (c *ReplaceSuffix) Fence() Fence { return Fence{OwnerSession, c.SessionID, c.Epoch} }

func (c *ReplaceSuffix) Touches() Touch {
	t := Touch{Session: c.SessionID, Audit: appends(c.Audit)}
	if len(c.Turn.Audit) > 0 {
		t.Audit = AuditAppends
	}
	return t
}

func (c *ReplaceSuffix) applyTo(h Handler) (Result, error) { return h.ReplaceSuffix(c) }

// SuffixDialect is what ApplyReplaceSuffix needs of a store, inside the
// command's transaction (and savepoint).
type SuffixDialect interface {
	// SuffixHead locks the session's row (where the store locks rows) and
	// reads its next and first sequences and whether it is closed;
	// NOT_FOUND when it does not exist.
	SuffixHead(sessionID string) (next, first int64, closed bool, err error)
	// MessagesFrom reads the session's stored messages with from <=
	// sequence < to, in sequence order.
	MessagesFrom(sessionID string, from, to int64) ([]*sessionv1.Message, error)
	// StoredIDs reads the sequence of each of ids stored in the session
	// (absent ids are not in the map).
	StoredIDs(sessionID string, ids []string) (map[string]int64, error)
	// Cut removes the messages from from on, empties the snapshot slot
	// when its sequence is >= from, and sets the next sequence to from
	// and updated_at to updatedAt (Unix nanoseconds, as stored).
	Cut(sessionID string, from, updatedAt int64) error
	// Append stores an append of one turn, decided at the cut, through
	// the store's own append path.
	Append(c *AppendMessages) (Result, error)
	// Audit appends entries to the chain.
	Audit(entries []*auditv1.AuditEntry) error
	// RememberRemoved records (or overwrites) the session's removed ids.
	RememberRemoved(sessionID string, removed []RemovedID) error
	// RemovedDigests reads the remembered digest of each of ids (absent
	// ids are not in the map).
	RemovedDigests(sessionID string, ids []string) (map[string]string, error)
}

// ApplyReplaceSuffix applies c (see ReplaceSuffix) through the store's
// dialect d. It is every store's Handler.ReplaceSuffix, run after the
// store checked c's epoch.
func ApplyReplaceSuffix(c *ReplaceSuffix, d SuffixDialect) (Result, error) {
	id := c.SessionID
	next, first, closed, err := d.SuffixHead(id)
	if err != nil {
		return Result{}, err
	}
	if closed {
		return Result{}, errs.FailedPrecondition("session %s is closed; its messages cannot be replaced", id)
	}
	if next != c.NextSequence {
		return Result{}, errs.FailedPrecondition("session %s: replacement decided at next sequence %d, but the next sequence is %d", id, c.NextSequence, next)
	}
	msgs := c.Turn.Messages
	if k := int64(len(msgs)); k > 0 && c.From+k == next && c.From >= first {
		dup, err := storedAsTurn(d, id, c.From, next, msgs)
		if err != nil {
			return Result{}, err
		}
		if dup != nil {
			return dup.Result(), nil
		}
	}
	if c.Expected != next {
		return Result{}, &SequenceMismatchError{SessionID: id, Expected: c.Expected, Next: next}
	}
	if err := checkCut(id, c.From, first, next); err != nil {
		return Result{}, err
	}
	removed, err := d.MessagesFrom(id, c.From, next)
	if err != nil {
		return Result{}, err
	}
	if err := checkRemoved(id, removed); err != nil {
		return Result{}, err
	}
	if err := checkReusedIDs(d, id, c.From, msgs, removed); err != nil {
		return Result{}, err
	}
	at, err := StoredTimeNanos("updated_at", c.UpdatedAt)
	if err != nil {
		return Result{}, Of("session", id, err)
	}
	if err := d.Cut(id, c.From, at); err != nil {
		return Result{}, err
	}
	if len(removed) > 0 {
		if err := d.RememberRemoved(id, removedIDs(removed)); err != nil {
			return Result{}, err
		}
	}
	out := SuffixResult{Removed: removed, NextSequence: c.From, Rewind: Rewind{From: c.From, Previous: next}}
	if len(msgs) > 0 || c.Turn.HasDelta() {
		app := &AppendMessages{Epoch: c.Epoch, SessionID: id, NextSequence: c.From, State: c.State,
			Turns: []Turn{c.Turn}, UpdatedAt: c.UpdatedAt}
		res, err := d.Append(app)
		if err != nil {
			return Result{}, err
		}
		a := app.ResultOf(res)
		if len(a.Turns) != 1 {
			return Result{}, errs.Internal("session %s: the store answered %d turns for 1", id, len(a.Turns))
		}
		if tr := a.Turns[0]; tr.Err != nil || tr.Duplicate {
			if tr.Err == nil {
				tr.Err = MessageIDTaken(id, msgs[0].GetMessageId())
			}
			return Result{}, tr.Err
		}
		out.Messages, out.Kept, out.NextSequence, out.State = a.Turns[0].Messages, a.Turns[0].Kept, a.NextSequence, a.State
	}
	if err := d.Audit(c.Audit); err != nil {
		return Result{}, err
	}
	return out.Result(), nil
}

// storedAsTurn returns a duplicate's result when the session's messages
// from..next-1 are msgs (same ids in order, same content), else nil.
func storedAsTurn(d SuffixDialect, id string, from, next int64, msgs []*sessionv1.Message) (*SuffixResult, error) {
	stored, err := d.MessagesFrom(id, from, next)
	if err != nil || len(stored) != len(msgs) {
		return nil, err
	}
	for i, m := range msgs {
		if stored[i].GetMessageId() != m.GetMessageId() {
			return nil, nil
		}
	}
	if CheckRetry(id, msgs, stored) != nil {
		return nil, nil
	}
	return &SuffixResult{Messages: stored, NextSequence: next, Duplicate: true}, nil
}

// checkCut checks that from names a cut of the stored history.
func checkCut(id string, from, first, next int64) error {
	switch {
	case from > next:
		return errs.InvalidArgument("session %s: cannot replace from sequence %d, past the next sequence %d", id, from, next)
	case from < first:
		return errs.FailedPrecondition("session %s: cannot replace from sequence %d: messages before %d were truncated", id, from, first)
	}
	return nil
}

func checkRemoved(id string, removed []*sessionv1.Message) error {
	if len(removed) > MaxSuffixRemoved {
		return errs.FailedPrecondition("session %s: the replacement would remove %d messages; at most %d at once", id, len(removed), MaxSuffixRemoved)
	}
	n := 0
	for _, m := range removed {
		n += MessagePageBytes(len(m.GetContent()), len(m.GetMetadataJson()))
	}
	if n > MaxSuffixRemovedBytes && len(removed) > 1 {
		return errs.FailedPrecondition("session %s: the replacement would remove %d bytes of messages; at most %d at once", id, n, MaxSuffixRemovedBytes)
	}
	return nil
}

// checkReusedIDs refuses a new message whose id is stored before the cut,
// or is a removed message's with other content.
func checkReusedIDs(d SuffixDialect, id string, from int64, msgs, removed []*sessionv1.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.GetMessageId()
	}
	seqs, err := d.StoredIDs(id, ids)
	if err != nil {
		return err
	}
	byID := make(map[string]*sessionv1.Message, len(removed))
	for _, m := range removed {
		byID[m.GetMessageId()] = m
	}
	if err := checkRemembered(d, id, msgs, seqs); err != nil {
		return err
	}
	for _, m := range msgs {
		seq, ok := seqs[m.GetMessageId()]
		if !ok {
			continue
		}
		old := byID[m.GetMessageId()]
		if seq < from || old == nil {
			return MessageIDTaken(id, m.GetMessageId())
		}
		if old.GetRole() != m.GetRole() || old.GetContent() != m.GetContent() ||
			emptyObject(old.GetMetadataJson()) != emptyObject(m.GetMetadataJson()) {
			return errs.AlreadyExists("session %s: message id %s is removed by this replacement and may be used again only with the same content", id, m.GetMessageId())
		}
	}
	return nil
}
