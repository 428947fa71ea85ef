package sqlstore

import (
	"context"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// SessionColumns are the columns of a new sessions row, in SessionArgs'
// order.
const SessionColumns = `session_id, actor_name, namespace, automation, metadata_json,
	state, input_tokens, output_tokens, cost, next_sequence, created_at, updated_at, closed_at,
	state_json, client_key, expires_at, first_sequence`

// SessionRow is a checked CreateSession's new sessions row.
type SessionRow struct {
	// Args are the row's values (SessionColumns).
	Args []any
	// First is the sequence of the first imported message, Next the one
	// after the last; UpdatedAt is the row's updated_at as stored.
	First, Next, UpdatedAt int64
}

// NewSessionRow checks a CreateSession's session and imported messages'
// times and item keys and returns its row: the state ACTIVE unless set, the times and
// expiry as stored, the messages numbered from first_sequence. Every error
// is the command's own. Args is appended to buf (a writer's reused
// argument slice, or nil), so that a create allocates no slice for it.
func NewSessionRow(c *persistence.CreateSession, buf []any) (SessionRow, error) {
	s := c.Session
	if s == nil || s.GetSessionId() == "" {
		return SessionRow{}, errs.InvalidArgument("create session: no session id")
	}
	for _, m := range c.Messages {
		if _, err := persistence.MessageNanos(m); err != nil {
			return SessionRow{}, err
		}
	}
	if err := persistence.CheckImportKeys(s.SessionId, c.Messages); err != nil {
		return SessionRow{}, err
	}
	state := s.GetState()
	if state == sessionv1.SessionState_SESSION_STATE_UNSPECIFIED {
		state = sessionv1.SessionState_SESSION_STATE_ACTIVE
	}
	times, err := persistence.SessionNanos(s)
	if err != nil {
		return SessionRow{}, err
	}
	expires, err := persistence.ExpiryNanos(s)
	if err != nil {
		return SessionRow{}, err
	}
	first := s.GetFirstSequence()
	if first < 0 {
		return SessionRow{}, errs.InvalidArgument("create session %s: first_sequence %d is negative", s.SessionId, first)
	}
	next := first + int64(len(c.Messages))
	tu := s.GetTokenUsage()
	return SessionRow{First: first, Next: next, UpdatedAt: times[1], Args: append(buf, s.SessionId, s.ActorName, s.Namespace, s.Automation,
		OrEmptyObject(s.MetadataJson), int64(state), tu.GetInputTokens(), tu.GetOutputTokens(), tu.GetCost(),
		next, times[0], times[1], times[2], OrEmptyObject(c.State), s.GetClientKey(), expires, first)}, nil
}

// UpsertLinkSQL links a session to a plan (LinkArgs), or updates the link.
const UpsertLinkSQL = `INSERT INTO session_links (session_id, plan_id, phase, state) VALUES (?, ?, ?, ?)
	ON CONFLICT (session_id, plan_id) DO UPDATE SET phase = excluded.phase, state = excluded.state`

// LinkArgs checks a session's link and returns the values of UpsertLinkSQL.
func LinkArgs(sessionID string, l *sessionv1.LinkedPlan) ([]any, error) {
	if l.GetPlanId() == "" {
		return nil, errs.InvalidArgument("session %s: linked plan has no plan_id", sessionID)
	}
	return []any{sessionID, l.PlanId, l.Phase, l.State}, nil
}

// OrEmptyObject is s, or "{}" for the empty JSON text.
func OrEmptyObject(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}

// UpdateArgs checks an UpdateSession and returns the values its update
// statement binds, in this order: the state, closed_at and updated_at (0
// leaves each alone), the token and cost deltas, the session id, and the
// largest token and cost totals a sum may reach (the statement matches no
// row when one would pass them; see persistence.AddTokens). setExpiry and
// expiresAt are the expiry change (expiresAt 0 clears it).
func UpdateArgs(c *persistence.UpdateSession) (args []any, setExpiry bool, expiresAt int64, err error) {
	closedAt, err := persistence.StoredTimeNanos("closed_at", c.ClosedAt)
	if err != nil {
		return nil, false, 0, persistence.Of("session", c.SessionID, err)
	}
	updatedAt, err := persistence.StoredTimeNanos("updated_at", c.UpdatedAt)
	if err != nil {
		return nil, false, 0, persistence.Of("session", c.SessionID, err)
	}
	tu := c.TokenDelta
	if err := persistence.CheckTokenDelta(tu); err != nil {
		return nil, false, 0, err
	}
	if c.SetExpiry && !c.ExpiresAt.IsZero() {
		if expiresAt, err = persistence.StoredTimeNanos("expires_at", c.ExpiresAt); err != nil {
			return nil, false, 0, persistence.Of("session", c.SessionID, err)
		}
	}
	return []any{int64(c.State), closedAt, tu.GetInputTokens(), tu.GetOutputTokens(), tu.GetCost(),
		updatedAt, c.SessionID, int64(persistence.MaxTokenTotal), persistence.MaxCostTotal}, c.SetExpiry, expiresAt, nil
}

// PutSnapshotSQL fills a session's snapshot slot (SnapshotArgs).
const PutSnapshotSQL = `INSERT INTO session_snapshots (session_id, sequence, data, created_at) VALUES (?, ?, ?, ?)
	ON CONFLICT (session_id) DO UPDATE SET sequence = excluded.sequence, data = excluded.data, created_at = excluded.created_at`

// SnapshotArgs checks a snapshot of session sessionID and returns the
// values of PutSnapshotSQL.
func SnapshotArgs(sessionID string, snap *sessionv1.Snapshot) ([]any, error) {
	created, err := persistence.StoredNanos("created_at", snap.GetCreatedAt())
	if err != nil {
		return nil, persistence.Of("snapshot of session", sessionID, err)
	}
	data := snap.GetData()
	if data == nil {
		data = []byte{}
	}
	return []any{sessionID, snap.GetSequence(), data, created}, nil
}

// TruncateCut returns the highest sequence a TruncateSession removes —
// c.Through, or with c.Limit the Limit-th message from the lowest when
// that comes first, so that what is left is always a suffix of the
// session — and its updated_at as stored. tx is the writer's transaction.
func TruncateCut(tx DB, c *persistence.TruncateSession) (cut, updatedAt int64, err error) {
	if updatedAt, err = persistence.StoredTimeNanos("updated_at", c.UpdatedAt); err != nil {
		return 0, 0, persistence.Of("session", c.SessionID, err)
	}
	cut = c.Through
	if c.Limit <= 0 {
		return cut, updatedAt, nil
	}
	var s int64
	err = tx.QueryRow(context.Background(), Rebind(tx, `SELECT sequence FROM session_messages WHERE session_id = ? AND sequence <= ?
		ORDER BY sequence LIMIT 1 OFFSET ?`), []any{c.SessionID, c.Through, c.Limit - 1}, []any{&s})
	switch {
	case err == nil:
		return s, updatedAt, nil
	case tx.NoRows(err):
		return cut, updatedAt, nil
	}
	return 0, 0, err
}

// Tx is what the shared steps of a command need of a store's writer
// transaction.
type Tx interface {
	// Link upserts a session's link to a plan (LinkArgs checks it).
	Link(sessionID string, l *sessionv1.LinkedPlan) error
	// Audit chains and stores audit entries (queued or at once).
	Audit(entries []*auditv1.AuditEntry) error
}

// Created is the last steps of a CreateSession, once its row and messages
// are written: the session's links, then its audit entries.
func Created(tx Tx, c *persistence.CreateSession, row *SessionRow) (persistence.Result, error) {
	for _, l := range c.Session.LinkedPlans {
		if err := tx.Link(c.Session.SessionId, l); err != nil {
			return persistence.Result{}, err
		}
	}
	if err := tx.Audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.Result{NextSequence: row.Next}, nil
}

// UpdateMissed explains an UpdateSession whose update matched no row: the
// session does not exist (NOT_FOUND), or one of its totals would overflow
// (persistence.TokenOverflow). tx is the writer's transaction.
func UpdateMissed(tx DB, sessionID string) error {
	var one int
	err := tx.QueryRow(context.Background(), Rebind(tx, `SELECT 1 FROM sessions WHERE session_id = ?`), []any{sessionID}, []any{&one})
	switch {
	case tx.NoRows(err):
		return errs.NotFound("session %s not found", sessionID)
	case err != nil:
		return err
	}
	return persistence.TokenOverflow(sessionID)
}
