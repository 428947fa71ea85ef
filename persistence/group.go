package persistence

import (
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// DeleteSessions (issue 30) deletes a group of sessions in one command:
// every visible session of Namespace whose client key starts with
// ClientKeyPrefix, or none. The store selects the group inside the
// transaction, so no session of it created or renamed meanwhile is
// missed; more than MaxGroupSessions is FAILED_PRECONDITION and nothing
// is deleted. Each session goes as a DeleteSession would, after its owner
// epoch was taken (so no write of an owner that still holds it commits
// afterwards), with the audit entry Entry builds for it.
type DeleteSessions struct {
	Namespace       string
	ClientKeyPrefix string
	// Entry builds the session_deleted entry of one member.
	Entry func(m GroupMember) (*auditv1.AuditEntry, error)
}

// MaxGroupSessions bounds one DeleteSessions.
const MaxGroupSessions = 1000

// GroupMember is one session of a group as the store read it.
type GroupMember struct {
	SessionID string
	ActorName string
	// Messages is the session's next sequence (what DeleteSession's
	// entry reports as its messages).
	Messages int64
}

// GroupResult is the outcome of a DeleteSessions.
type GroupResult struct {
	// In session_id order.
	SessionIDs      []string
	MessagesRemoved int64
}

// Result returns a Result carrying x.
func (x GroupResult) Result() Result { var r Result; r.own.group = &x; return r }

// ResultOf returns the outcome r carries of c.
func (c *DeleteSessions) ResultOf(r Result) GroupResult {
	if r.own.group == nil {
		return GroupResult{}
	}
	return *r.own.group
}

func (c *DeleteSessions) Size() int                         { return rowOverhead }
func (c *DeleteSessions) Fence() Fence                      { return Fence{} }
func (c *DeleteSessions) Touches() Touch                    { return Touch{AnySession: true, Audit: AuditAppends} }
func (c *DeleteSessions) applyTo(h Handler) (Result, error) { return h.DeleteSessions(c) }

// GroupDialect is what ApplyDeleteSessions needs of a store, inside the
// command's transaction (and savepoint).
type GroupDialect interface {
	// GroupMembers reads the visible sessions of namespace whose client
	// key starts with prefix, in session_id order, at most limit.
	GroupMembers(namespace, prefix string, limit int) ([]GroupMember, error)
	// TakeEpoch is ActivateDialect's.
	TakeEpoch(kind OwnerKind, id string, fresh bool) (int64, error)
	// Audit appends entries to the chain.
	Audit(entries []*auditv1.AuditEntry) error
}

// ApplyDeleteSessions applies c through the store's dialect d and its
// Handler h for the same transaction. It is every store's
// Handler.DeleteSessions.
func ApplyDeleteSessions(c *DeleteSessions, d GroupDialect, h Handler) (Result, error) {
	if c.ClientKeyPrefix == "" {
		return Result{}, errs.InvalidArgument("delete sessions: no client_key_prefix")
	}
	if c.Entry == nil {
		return Result{}, errs.InvalidArgument("delete sessions: no audit entry builder")
	}
	ms, err := d.GroupMembers(c.Namespace, c.ClientKeyPrefix, MaxGroupSessions+1)
	if err != nil {
		return Result{}, err
	}
	if len(ms) > MaxGroupSessions {
		return Result{}, errs.FailedPrecondition("namespace %s holds more than %d sessions with client keys starting %q; delete them in smaller groups",
			c.Namespace, MaxGroupSessions, c.ClientKeyPrefix)
	}
	out := GroupResult{SessionIDs: make([]string, 0, len(ms))}
	entries := make([]*auditv1.AuditEntry, 0, len(ms))
	for _, m := range ms {
		epoch, err := d.TakeEpoch(OwnerSession, m.SessionID, false)
		if err != nil {
			return Result{}, err
		}
		del := &DeleteSession{Epoch: epoch, SessionID: m.SessionID}
		// Dispatch, not the store's command path: its epoch check would
		// read back the epoch just taken.
		res, err := Dispatch(h, del)
		if err != nil {
			return Result{}, err
		}
		e, err := c.Entry(m)
		if err != nil {
			return Result{}, err
		}
		entries = append(entries, e)
		out.SessionIDs = append(out.SessionIDs, m.SessionID)
		out.MessagesRemoved += del.ResultOf(res).MessagesRemoved
	}
	if err := d.Audit(entries); err != nil {
		return Result{}, err
	}
	return out.Result(), nil
}
