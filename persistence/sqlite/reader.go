package sqlite

import (
	"context"
	"database/sql"
	"sort"
	"strings"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// reader is the store's own part of its sqlstore.Reader (sqlstore.Own),
// on the read-only pool. Each method is one statement (an implicit read transaction that ends with it), so no reader
// holds a snapshot across calls and checkpoints can always catch up.
type reader struct {
	db *sql.DB
}

// sessionSelect yields one row per (session, linked plan), sessions in id
// order and links in insertion order; a session without links has one row
// with NULL link columns. The inner query picks the sessions.
//
// Token totals are read saturated (CAST of an out-of-range REAL gives the
// int64 end) and the cost clamped (persistence.ReadableCost), so a row
// that an overflowing update corrupted before such updates were refused
// still reads, exports and deletes.
const sessionSelect = `SELECT s.session_id, s.actor_name, s.namespace, s.automation, s.metadata_json, s.state,
	CAST(s.input_tokens AS INTEGER), CAST(s.output_tokens AS INTEGER), s.cost, s.created_at, s.updated_at, s.closed_at, s.next_sequence,
	s.client_key, s.expires_at, s.first_sequence, l.plan_id, l.phase, l.state
	FROM (%s) s LEFT JOIN session_links l ON l.session_id = s.session_id
	ORDER BY s.session_id, l.id`

// getSessionSQL is sessionSelect for one session, without its ORDER BY:
// sorting makes SQLite build a temporary B-tree per query, which cost a
// lookup 40–70 µs of CPU where the rows themselves take under 10 (every
// activation of a session actor loads its session this way: issue 17's
// W4 and new-session workloads). It yields the link's id instead, and
// GetSession puts the links in insertion order itself.
var getSessionSQL = sessionSelect[:strings.Index(sessionSelect, "FROM (%s)")] + `, l.id
	FROM sessions s LEFT JOIN session_links l ON l.session_id = s.session_id
	WHERE s.session_id = ? AND s.state != ?`

func (r *reader) sessions(ctx context.Context, inner string, args ...any) ([]*sessionv1.Session, error) {
	return r.readSessions(ctx, strings.Replace(sessionSelect, "%s", inner, 1), nil, args...)
}

// readSessions runs query, whose rows are sessionSelect's, and, when
// linkIDs is not nil, one more column: the link's id, appended to
// *linkIDs in the order of the links read.
func (r *reader) readSessions(ctx context.Context, query string, linkIDs *[]int64, args ...any) ([]*sessionv1.Session, error) {
	rows, err := r.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, storeErr("read sessions", err)
	}
	defer rows.Close()
	var out []*sessionv1.Session
	var cur *sessionv1.Session
	for rows.Next() {
		s := &sessionv1.Session{TokenUsage: &sessionv1.TokenUsage{}}
		var state, created, updated, closed, expires int64
		var planID, phase, lstate sql.NullString
		var linkID sql.NullInt64
		dest := []any{&s.SessionId, &s.ActorName, &s.Namespace, &s.Automation, &s.MetadataJson, &state,
			&s.TokenUsage.InputTokens, &s.TokenUsage.OutputTokens, &s.TokenUsage.Cost, &created, &updated, &closed,
			&s.MessageCount, &s.ClientKey, &expires, &s.FirstSequence, &planID, &phase, &lstate}
		if linkIDs != nil {
			dest = append(dest, &linkID)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, storeErr("read sessions", err)
		}
		if cur == nil || cur.SessionId != s.SessionId {
			s.TokenUsage.Cost = persistence.ReadableCost(s.TokenUsage.Cost)
			s.State = sessionv1.SessionState(state)
			s.CreatedAt, s.UpdatedAt, s.ClosedAt = persistence.Stamp(created), persistence.Stamp(updated), persistence.Stamp(closed)
			s.ExpiresAt = persistence.Stamp(expires)
			out = append(out, s)
			cur = s
		}
		if planID.Valid {
			cur.LinkedPlans = append(cur.LinkedPlans, &sessionv1.LinkedPlan{PlanId: planID.String, Phase: phase.String, State: lstate.String})
			if linkIDs != nil {
				*linkIDs = append(*linkIDs, linkID.Int64)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr("read sessions", err)
	}
	return out, nil
}

func (r *reader) GetSession(ctx context.Context, sessionID string) (*sessionv1.Session, error) {
	var linkIDs []int64
	out, err := r.readSessions(ctx, getSessionSQL, &linkIDs, sessionID, int64(persistence.SessionStateStaged))
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errs.NotFound("session %s not found", sessionID)
	}
	s := out[0]
	if len(s.LinkedPlans) > 1 { // in insertion order, as sessionSelect's ORDER BY puts them
		order := make([]int, len(s.LinkedPlans))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return linkIDs[order[a]] < linkIDs[order[b]] })
		sorted := make([]*sessionv1.LinkedPlan, len(order))
		for i, j := range order {
			sorted[i] = s.LinkedPlans[j]
		}
		s.LinkedPlans = sorted
	}
	return s, nil
}

func (r *reader) ListSessions(ctx context.Context, f persistence.SessionFilter) ([]*sessionv1.Session, error) {
	inner, args := sqlstore.SessionsQuery(dialect{}, f)
	return r.sessions(ctx, inner, args...)
}

func (r *reader) ListMessages(ctx context.Context, sessionID string, from int64, limit int) ([]*sessionv1.Message, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT length(CAST(content AS BLOB)) + length(CAST(metadata_json AS BLOB)) + ?1,
		`+pageColumns+`
		FROM session_messages WHERE session_id = ?2 AND sequence >= ?3
		AND NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = ?2 AND state = ?5)
		ORDER BY sequence LIMIT ?4`,
		persistence.MessageOverhead, sessionID, from, persistence.ClampLimit(limit), int64(persistence.SessionStateStaged))
	return page(rows, err, sessionID, true)
}

// pageColumns are what page reads of each row, after its size.
const pageColumns = `sequence, message_id, role, content, metadata_json, created_at, event_at, item_key, kind`

// page reads the rows of a message query (each row's size first, then
// pageColumns). SQLite steps the statement row by row, so stopping at the
// byte cap (when capped) reads no further row; the sizes are taken before
// the values are. A page has at least its first message.
func page(rows *sql.Rows, err error, sessionID string, capped bool) ([]*sessionv1.Message, error) {
	out, _, err := pageUpTo(rows, err, sessionID, capped, -1)
	return out, err
}

// pageUpTo is page that keeps at most limit messages (-1: all) and says
// whether a row was left unread for the cap or the limit: more follow.
func pageUpTo(rows *sql.Rows, err error, sessionID string, capped bool, limit int) ([]*sessionv1.Message, bool, error) {
	if err != nil {
		return nil, false, storeErr("list messages", err)
	}
	defer rows.Close()
	var out []*sessionv1.Message
	bytes := 0
	for rows.Next() {
		if len(out) == limit {
			return out, true, nil
		}
		m := &sessionv1.Message{SessionId: sessionID}
		var role, created, event, size int64
		if err := rows.Scan(&size, &m.Sequence, &m.MessageId, &role, &m.Content, &m.MetadataJson, &created, &event,
			&m.ItemKey, &m.Kind); err != nil {
			return nil, false, storeErr("list messages", err)
		}
		if bytes += int(size); capped && len(out) > 0 && bytes > persistence.MaxPageBytes {
			return out, true, nil
		}
		m.Role, m.CreatedAt, m.EventTime = sessionv1.Role(role), persistence.Stamp(created), persistence.Stamp(event)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, false, storeErr("list messages", err)
	}
	return out, false, nil
}

// AuditAnchor reads "" when no prune has written the anchor's row yet.
func (r *reader) AuditAnchor(ctx context.Context) (hash string, err error) {
	err = r.db.QueryRowContext(ctx, `SELECT COALESCE((SELECT anchor_hash FROM audit_meta WHERE id = 1), '')`).Scan(&hash)
	return hash, storeErr("audit anchor", err)
}
