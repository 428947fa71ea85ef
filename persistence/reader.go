package persistence

import (
	"context"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

// Reader runs queries on read-only connections. Every method is safe for
// concurrent use. Limits are clamped to 1..1000 (0 means 100). It is the
// sum of the narrow readers below, one per concern, so that a caller can
// ask for (and a test fake provide) only what it reads.
type Reader interface {
	SessionReader
	MessageReader
	ItemReader
	StateReader
	PlanReader
	AuditReader
	RetentionReader
}

// SessionReader reads sessions.
type SessionReader interface {
	// GetSession returns the session with token usage, linked plans and
	// message_count. NOT_FOUND when missing.
	GetSession(ctx context.Context, sessionID string) (*sessionv1.Session, error)
	// ListSessions returns sessions ordered by session_id, after
	// f.AfterID.
	ListSessions(ctx context.Context, f SessionFilter) ([]*sessionv1.Session, error)
	// FindSession returns the id of the session with this client key in
	// namespace. NOT_FOUND when none (or staged).
	FindSession(ctx context.Context, namespace, clientKey string) (string, error)
}

// MessageReader reads a session's messages.
type MessageReader interface {
	// ListMessages returns messages with sequence >= from, in sequence
	// order: at most limit, and no more than fit in MaxPageBytes (but
	// always one, if there is one). An unknown session gives an empty list.
	ListMessages(ctx context.Context, sessionID string, from int64, limit int) ([]*sessionv1.Message, error)
	// ListMessagesWhere is ListMessages with time filters and "last N"
	// (MessageFilter).
	ListMessagesWhere(ctx context.Context, f MessageFilter) ([]*sessionv1.Message, error)
}

// StateReader reads sessions' and shared scopes' state and snapshots.
type StateReader interface {
	// GetSessionState returns the session's state (a JSON object) and its
	// next sequence, read together from the session's row: the state as of
	// that sequence. NOT_FOUND when missing (or staged).
	GetSessionState(ctx context.Context, sessionID string) (string, int64, error)
	// GetScopes returns the named shared scopes, in the order given; a
	// scope never written is "{}" with a zero updated_at.
	GetScopes(ctx context.Context, names []string) ([]*sessionv1.ScopeState, error)
	// GetSnapshot returns the session's snapshot slot, nil when empty.
	GetSnapshot(ctx context.Context, sessionID string) (*sessionv1.Snapshot, error)
}

// PlanReader reads plans.
type PlanReader interface {
	// GetPlan returns the stored state of plan planID of namespace ns
	// ("" is DefaultNamespace). NOT_FOUND when nothing was ever written
	// for it.
	GetPlan(ctx context.Context, ns, planID string) (*PlanState, error)
	// PlanHistory returns error records in sequence order.
	PlanHistory(ctx context.Context, f PlanFilter) ([]*planv1.ErrorRecord, error)
}

// AuditReader reads the audit log: pages, the chain, the feed.
type AuditReader interface {
	// ListAudit returns entries in commit order, after the entry
	// afterEventID ("" = from the first). NOT_FOUND when afterEventID is
	// not stored (pruned or never existed).
	ListAudit(ctx context.Context, f *auditv1.Filter, afterEventID string, limit int) ([]*auditv1.AuditEntry, error)
	CountAudit(ctx context.Context, f *auditv1.Filter) (int64, error)
	// GetAudit returns one entry. NOT_FOUND when missing.
	GetAudit(ctx context.Context, eventID string) (*auditv1.AuditEntry, error)
	// ScanAudit returns entries with Position > afterPosition in commit
	// order, for chain verification.
	ScanAudit(ctx context.Context, afterPosition int64, limit int) ([]*auditv1.AuditEntry, error)
	// AuditAnchor returns the hash the first remaining entry must chain
	// on: "" before any prune, else the last pruned entry's hash.
	AuditAnchor(ctx context.Context) (string, error)
	// AuditBounds returns the anchor (the position of the last pruned
	// entry, 0 before any prune) and the head (the highest committed
	// position; the anchor when no entry is left). Positions are assigned
	// densely in commit order, so every entry in (anchor, head] is
	// committed and stored: a feed that read up to head missed nothing.
	AuditBounds(ctx context.Context) (anchor, head int64, err error)
	// FeedAudit returns the entries that match f with after < position
	// <= upto, in commit order, at most limit. Bounded above by upto (a
	// head from AuditBounds), a page never reaches past what the caller
	// knows to be complete.
	FeedAudit(ctx context.Context, f *FeedFilter, after, upto int64, limit int) ([]*auditv1.AuditEntry, error)
}

// RetentionReader finds what retention removes.
type RetentionReader interface {
	// ListExpired returns up to limit ids of sessions whose expires_at is
	// set and not after now, soonest first.
	ListExpired(ctx context.Context, now time.Time, limit int) ([]string, error)
}

// MessageFilter selects messages of a session: sequence >= From, and an
// event time (the client's, else created_at) after After and before
// Before (exclusive; 0 = unbounded), in sequence order. Last > 0 returns
// only the last Last of those (clamped to 1..1000), without the byte cap;
// otherwise at most Limit (ClampLimit), capped by MaxPageBytes as
// ListMessages is.
type MessageFilter struct {
	SessionID     string
	From          int64
	After, Before int64
	Last          int
	Limit         int
}

// SessionFilter selects sessions; empty fields match everything.
type SessionFilter struct {
	ActorName string
	Namespace string
	State     sessionv1.SessionState
	AfterID   string
	Limit     int
}

// PlanFilter selects a plan's error records.
type PlanFilter struct {
	// The plan is (Namespace, PlanID); "" is DefaultNamespace.
	Namespace    string
	PlanID       string
	Phase        planv1.Phase
	Category     planv1.ErrorCategory
	FromSequence int64
	Limit        int
}

// PlanState is what a plan actor reloads on activation.
type PlanState struct {
	Namespace        string
	PlanID           string
	MaxRetries       int32
	NextSequence     int64
	ErrorDetailsJSON string
	StepRetries      []StepRetry
}

// DefaultMaxRetries is the retry limit of a plan with no policy.
const DefaultMaxRetries = 3
