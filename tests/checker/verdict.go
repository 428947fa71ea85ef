package checker

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

// Observed is what the database holds, as read back through the node after
// the load: everything Check compares the ledger against.
type Observed struct {
	// Sessions maps each ledger session to what was read; a missing key
	// or a nil view means Get answered NOT_FOUND.
	Sessions map[string]*SessionView
	// Plans maps each ledger plan (PlanRef of its namespace and id) to its
	// History, in read order.
	Plans map[string][]*planv1.ErrorRecord
	// Audit maps each acknowledged event id to the stored entry; nil or
	// missing means Get answered NOT_FOUND.
	Audit map[string]*auditv1.AuditEntry
	// AuditLog is every stored entry of the load's event type, in commit
	// order: where an entry stored twice shows.
	AuditLog []*auditv1.AuditEntry
	// Chain is the answer of audit Verify.
	Chain *auditv1.VerifyResponse
	// Keyed maps each keyed batches' session to its messages (keyed.go);
	// a missing key means Get answered NOT_FOUND.
	Keyed map[string][]*sessionv1.Message
	// Suffix maps each replacements' session to its messages (suffix.go).
	Suffix map[string][]*sessionv1.Message
}

// SessionView is one session as read: Get, then ListMessages paged from 0.
type SessionView struct {
	Session  *sessionv1.Session
	Messages []*sessionv1.Message
	// State is GetState's state, StateNext its next sequence, ScopeValue
	// the session's key in the shared scope (state.go).
	State      string
	StateNext  int64
	ScopeValue string
}

// Report holds the checker's figures. The fields from Lost on are
// violations: a correct node leaves every one of them at zero.
type Report struct {
	Sessions     int
	AppendsAcked int // turns acknowledged (first acknowledgements, not replays)
	// BatchAcked counts the acknowledgements (replays included) that
	// came over AppendBatches streams (LoadConfig.BatchEvery).
	BatchAcked    int64
	MessagesAcked int // distinct messages acknowledged
	Replays       int // acknowledged re-sends of already acknowledged turns
	// RetriedStored counts turns whose retry was answered as a duplicate:
	// an earlier attempt had been stored but its answer was lost (a kill
	// between commit and reply). The idempotent-retry path at work.
	RetriedStored   int
	MessagesStored  int
	PlanErrorsAcked int
	PlanRecords     int // records stored (retries of requests without a record_id may add some)
	AuditAcked      int
	// AuditRetriedStored counts audit records whose retry was answered
	// as a duplicate (an earlier attempt was stored, its answer lost).
	AuditRetriedStored int
	AuditChecked       int64 // entries Verify walked
	Kills              int   // SIGKILLs delivered to the node
	Attempts           int64 // RPC attempts by the load
	Failed             int64 // attempts that failed (retried, or ending the request)
	// MaybeApplied counts requests without client ids (the load sends
	// none: appends, plan errors and audit records all carry theirs and
	// are retried) answered OUTCOME_UNKNOWN (gRPC DEADLINE_EXCEEDED):
	// neither acknowledged nor retried; each may or may not be stored.
	MaybeApplied int64

	Lost int // acknowledged, not found (a message, a plan record, an audit entry, a session)
	// Duplicates, per write kind: one request stored twice — what a
	// retry after an answer lost in a crash does if a client id does not
	// stop it, or if the client was told UNAVAILABLE for a write that had
	// committed.
	DupAppends     int // a message id, a sequence or a message's content stored twice in a session
	DupPlanRecords int // a plan record id stored twice
	DupAudit       int // an audit event id, or one request's content, stored twice
	Gaps           int // sequence numbers missing from 0..n-1, or a message_count that disagrees
	Changed        int // found, but not as acknowledged (sequence, content, hash, ...)
	Reordered      int // read order ≠ sequence order, or a turn sent after another's ack got an earlier sequence
	Phantom        int // stored but never sent, or more plan records than attempts
	BadAcks        int // an answer inconsistent in itself (ids, consecutive sequences, durable flag)
	ChainBroken    int // 1 when the audit chain does not verify
	// FalseUnavailable counts requests answered "stored already" on a
	// retry although each earlier attempt had been answered UNAVAILABLE or
	// RESOURCE_EXHAUSTED, which promise that nothing was stored.
	FalseUnavailable int
	Rejected         int // requests refused with a code that retrying can never cure
	// StateDiffers: a session's state or scope key is not what its
	// stored turns' deltas replay to (state.go).
	StateDiffers int
	// Leaked: a tenant's session, message or audit entry that another
	// tenant's principal could read, list or find (tenants.go).
	Leaked int
	// Truncated counts the messages truncations removed (not a violation).
	Truncated int
	// KeyedAcked, KeyedKept, KeyedStored: keyed batches acknowledged,
	// their messages answered as kept (a stored one held the key), and
	// the keyed sessions' messages stored (keyed.go).
	KeyedAcked, KeyedKept, KeyedStored int
	// SuffixReplaced, SuffixRemoved: replacements acknowledged and the
	// messages they removed, legitimately gone (suffix.go).
	SuffixReplaced, SuffixRemoved int

	// Problems describes the first violations found.
	Problems []string
}

// maxProblems bounds Report.Problems: the first few say what is wrong.
const maxProblems = 20

// Violations is the number of things a correct node never does.
func (r *Report) Violations() int {
	return r.Lost + r.DupAppends + r.DupPlanRecords + r.DupAudit + r.Gaps + r.Changed + r.Reordered + r.Phantom + r.BadAcks + r.ChainBroken + r.FalseUnavailable + r.Rejected + r.StateDiffers + r.Leaked
}

// ErrViolations is returned (wrapped) by Report.Err when the node broke
// a promise.
var ErrViolations = errors.New("checker: violations found")

// Err is nil when there are no violations, else ErrViolations wrapped with
// the figures and the first problems.
func (r *Report) Err() error {
	if r.Violations() == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s\n%s", ErrViolations, r.String(), strings.Join(r.Problems, "\n"))
}

// String prints the figures on one line each group.
func (r *Report) String() string {
	return fmt.Sprintf("sessions=%d appends_acked=%d batch_acked=%d messages_acked=%d replays=%d retried_stored=%d messages_stored=%d "+
		"plan_errors_acked=%d plan_records=%d audit_acked=%d audit_retried_stored=%d audit_verified=%d kills=%d attempts=%d failed_attempts=%d maybe_applied=%d | "+
		"truncated=%d keyed_acked=%d keyed_kept=%d keyed_stored=%d suffix_replaced=%d suffix_removed=%d | lost=%d dup_appends=%d dup_plan_records=%d dup_audit=%d gaps=%d changed=%d reordered=%d phantom=%d bad_acks=%d chain_broken=%d false_unavailable=%d rejected=%d state_differs=%d leaked=%d",
		r.Sessions, r.AppendsAcked, r.BatchAcked, r.MessagesAcked, r.Replays, r.RetriedStored, r.MessagesStored,
		r.PlanErrorsAcked, r.PlanRecords, r.AuditAcked, r.AuditRetriedStored, r.AuditChecked, r.Kills, r.Attempts, r.Failed, r.MaybeApplied,
		r.Truncated, r.KeyedAcked, r.KeyedKept, r.KeyedStored, r.SuffixReplaced, r.SuffixRemoved, r.Lost, r.DupAppends, r.DupPlanRecords, r.DupAudit, r.Gaps, r.Changed, r.Reordered, r.Phantom, r.BadAcks, r.ChainBroken, r.FalseUnavailable, r.Rejected, r.StateDiffers, r.Leaked)
}

func (r *Report) problem(counter *int, format string, args ...any) {
	r.problemN(counter, 1, format, args...)
}

// problemN counts n violations under one description.
func (r *Report) problemN(counter *int, n int, format string, args ...any) {
	*counter += n
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Check compares the ledger with what the database holds and returns the
// figures. It only reads l and o.
func Check(l *Ledger, o *Observed) Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	var r Report
	r.Sessions = len(l.sessions)
	acked := checkAppendAcks(l, &r)
	for _, sid := range l.sessions {
		checkSession(l, o, sid, acked[sid], &r)
	}
	checkPlans(l, o, &r)
	checkAudit(l, o, &r)
	checkKeyed(l, o, &r)
	checkSuffix(l, o, &r)
	for _, p := range l.falseUnavailable {
		r.problem(&r.FalseUnavailable, "%s", p)
	}
	return r
}

// ackedMsg is what the node promised about one message.
type ackedMsg struct {
	msg Msg
	seq int64
}

// checkAppendAcks judges each answer on its own and against the other
// answers for the same messages, and returns the promised messages per
// session.
func checkAppendAcks(l *Ledger, r *Report) map[string]map[string]ackedMsg {
	acked := make(map[string]map[string]ackedMsg)
	spans := make(map[string][]span)
	for _, a := range l.appends {
		sid := a.Turn.Session
		if a.Replay {
			r.Replays++
			if !a.Duplicate {
				r.problem(&r.BadAcks, "session %s: a replay of acknowledged turn %v was not answered as a duplicate", sid, a.Got)
			}
		}
		if len(a.Got) != len(a.Turn.Messages) {
			r.problem(&r.BadAcks, "session %s: %d messages sent, %d acknowledged", sid, len(a.Turn.Messages), len(a.Got))
			continue
		}
		if acked[sid] == nil {
			acked[sid] = make(map[string]ackedMsg)
		}
		fresh := 0
		for i, g := range a.Got {
			sent := a.Turn.Messages[i]
			if g.ID != sent.ID {
				r.problem(&r.BadAcks, "session %s: message %d sent as %s, acknowledged as %s", sid, i, sent.ID, g.ID)
				continue
			}
			if i > 0 && g.Seq != a.Got[i-1].Seq+1 {
				r.problem(&r.BadAcks, "session %s: turn acknowledged with non-consecutive sequences %v", sid, a.Got)
			}
			prev, seen := acked[sid][g.ID]
			switch {
			case !seen:
				acked[sid][g.ID] = ackedMsg{msg: sent, seq: g.Seq}
				fresh++
			case prev.seq != g.Seq:
				r.problem(&r.Changed, "session %s: message %s acknowledged as sequence %d, later as %d", sid, g.ID, prev.seq, g.Seq)
			}
		}
		r.MessagesAcked += fresh
		if a.Replay || len(a.Got) == 0 {
			continue
		}
		r.AppendsAcked++
		if a.Duplicate {
			r.RetriedStored++
		}
		spans[sid] = append(spans[sid], span{sent: a.SentAt, acked: a.AckedAt, lo: a.Got[0].Seq, hi: a.Got[len(a.Got)-1].Seq, client: a.Client})
	}
	for _, sid := range sortedKeys(spans) {
		checkRealTimeOrder(sid, spans[sid], r)
	}
	return acked
}

// span is one acknowledged turn: when it was first sent, when its answer
// arrived (ledger clock), and the sequences it got.
type span struct {
	sent, acked int64
	lo, hi      int64
	client      int
}

// checkRealTimeOrder: a turn answered before another turn of the same
// session was first sent was committed first, so it must hold the lower
// sequences (whichever clients sent them). For each turn B, the highest
// sequence of the turns answered before B was sent must be below B's.
func checkRealTimeOrder(sid string, spans []span, r *Report) {
	byAck := slices.Clone(spans)
	slices.SortFunc(byAck, func(a, b span) int { return cmp.Compare(a.acked, b.acked) })
	prefixMax := make([]int64, len(byAck)) // highest sequence among byAck[:i+1]
	for i, a := range byAck {
		prefixMax[i] = a.hi
		if i > 0 {
			prefixMax[i] = max(prefixMax[i], prefixMax[i-1])
		}
	}
	for _, b := range spans {
		i, _ := slices.BinarySearchFunc(byAck, b.sent, func(a span, t int64) int { return cmp.Compare(a.acked, t) })
		if i > 0 && prefixMax[i-1] >= b.lo {
			r.problem(&r.Reordered, "session %s: client %d's turn got sequence %d, but sequence %d had been acknowledged before it was sent",
				sid, b.client, b.lo, prefixMax[i-1])
		}
	}
}

// checkSession compares one session as read with its promises: sequences
// exactly 0..n-1 in read order, no id twice, every acknowledged message
// present unchanged, nothing that was never sent.
func checkSession(l *Ledger, o *Observed, sid string, acked map[string]ackedMsg, r *Report) {
	v := o.Sessions[sid]
	if v == nil || v.Session == nil {
		r.problemN(&r.Lost, 1+len(acked), "session %s: acknowledged as created, not found (%d acknowledged messages with it)", sid, len(acked))
		return
	}
	r.MessagesStored += len(v.Messages)
	byID := make(map[string]*sessionv1.Message, len(v.Messages))
	byContent := make(map[string]string, len(v.Messages)) // content → first message id; the load's contents are unique
	seqs := make(map[int64]bool, len(v.Messages))
	prev := int64(-1)
	for _, m := range v.Messages {
		if m.GetSessionId() != sid {
			r.problem(&r.Phantom, "session %s: read a message of session %q", sid, m.GetSessionId())
		}
		if _, dup := byID[m.GetMessageId()]; dup {
			r.problem(&r.DupAppends, "session %s: message id %s stored twice", sid, m.GetMessageId())
		} else if first, dup := byContent[m.GetContent()]; dup && m.GetContent() != "" {
			r.problem(&r.DupAppends, "session %s: message %s stores the content of message %s again", sid, m.GetMessageId(), first)
		} else {
			byContent[m.GetContent()] = m.GetMessageId()
		}
		byID[m.GetMessageId()] = m
		if seqs[m.GetSequence()] {
			r.problem(&r.DupAppends, "session %s: sequence %d stored twice", sid, m.GetSequence())
		}
		seqs[m.GetSequence()] = true
		if m.GetSequence() < prev {
			r.problem(&r.Reordered, "session %s: sequence %d read after %d", sid, m.GetSequence(), prev)
		}
		prev = max(prev, m.GetSequence())
		if _, ok := l.sent[sid][m.GetMessageId()]; !ok {
			r.problem(&r.Phantom, "session %s: message %s (sequence %d) was never sent", sid, m.GetMessageId(), m.GetSequence())
		}
	}
	for s := range seqs {
		if s < 0 {
			r.problem(&r.Gaps, "session %s: negative sequence %d", sid, s)
		}
	}
	first := v.Session.GetFirstSequence()
	for s := first; s <= prev; s++ {
		if !seqs[s] {
			r.problem(&r.Gaps, "session %s: sequence %d missing (highest %d)", sid, s, prev)
		}
	}
	if got := v.Session.GetMessageCount(); got != first+int64(len(v.Messages)) {
		r.problem(&r.Gaps, "session %s: message_count %d, but %d messages read from %d", sid, got, len(v.Messages), first)
	}
	if v.State != "" {
		checkState(l, sid, v, r)
	}
	ids := make([]string, 0, len(acked))
	for id := range acked {
		ids = append(ids, id)
	}
	slices.Sort(ids) // deterministic problem order
	for _, id := range ids {
		a := acked[id]
		m := byID[id]
		switch {
		case m == nil && a.seq < first:
			// Truncated: checkState holds first to the truncations.
		case m == nil:
			r.problem(&r.Lost, "session %s: acknowledged message %s (sequence %d) not found", sid, id, a.seq)
		case m.GetSequence() != a.seq:
			r.problem(&r.Changed, "session %s: message %s acknowledged as sequence %d, stored as %d", sid, id, a.seq, m.GetSequence())
		case m.GetContent() != a.msg.Content || m.GetRole() != a.msg.Role:
			r.problem(&r.Changed, "session %s: message %s stored with other content or role", sid, id)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
