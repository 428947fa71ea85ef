package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sort"
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// reader runs every query on the read-only pool. Each method is one
// statement (an implicit read transaction that ends with it), so no reader
// holds a snapshot across calls and checkpoints can always catch up.
type reader struct {
	db *sql.DB
}

var _ persistence.Reader = (*reader)(nil)

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
	var where []string
	var args []any
	if f.AfterID != "" {
		where, args = append(where, "session_id > ?"), append(args, f.AfterID)
	}
	if f.ActorName != "" {
		where, args = append(where, "actor_name = ?"), append(args, f.ActorName)
	}
	if f.Namespace != "" {
		where, args = append(where, "namespace = ?"), append(args, f.Namespace)
	}
	if f.State != sessionv1.SessionState_SESSION_STATE_UNSPECIFIED {
		where, args = append(where, "state = ?"), append(args, int64(f.State))
	} else {
		where, args = append(where, "state != ?"), append(args, int64(persistence.SessionStateStaged))
	}
	inner := "SELECT * FROM sessions" + whereClause(where) + " ORDER BY session_id LIMIT ?"
	return r.sessions(ctx, inner, append(args, persistence.ClampLimit(f.Limit))...)
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

func (r *reader) ListMessages(ctx context.Context, sessionID string, from int64, limit int) ([]*sessionv1.Message, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT length(CAST(content AS BLOB)) + length(CAST(metadata_json AS BLOB)) + ?1,
		sequence, message_id, role, content, metadata_json, created_at, event_at
		FROM session_messages WHERE session_id = ?2 AND sequence >= ?3
		AND NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = ?2 AND state = ?5)
		ORDER BY sequence LIMIT ?4`,
		persistence.MessageOverhead, sessionID, from, persistence.ClampLimit(limit), int64(persistence.SessionStateStaged))
	if err != nil {
		return nil, storeErr("list messages", err)
	}
	defer rows.Close()
	var out []*sessionv1.Message
	// SQLite steps the statement row by row, so stopping here at the byte
	// cap reads no further row; the sizes are taken before the values are.
	bytes := 0
	for rows.Next() {
		m := &sessionv1.Message{SessionId: sessionID}
		var role, created, event, size int64
		if err := rows.Scan(&size, &m.Sequence, &m.MessageId, &role, &m.Content, &m.MetadataJson, &created, &event); err != nil {
			return nil, storeErr("list messages", err)
		}
		if bytes += int(size); len(out) > 0 && bytes > persistence.MaxPageBytes {
			break
		}
		m.Role, m.CreatedAt, m.EventTime = sessionv1.Role(role), persistence.Stamp(created), persistence.Stamp(event)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr("list messages", err)
	}
	return out, nil
}

func (r *reader) GetPlan(ctx context.Context, planID string) (*persistence.PlanState, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT p.max_retries, p.error_details_json,
		(SELECT COALESCE(MAX(e.sequence) + 1, 0) FROM plan_errors e WHERE e.plan_id = p.plan_id),
		s.phase, s.step_id, s.count
		FROM plans p LEFT JOIN plan_step_retries s ON s.plan_id = p.plan_id
		WHERE p.plan_id = ? ORDER BY s.phase, s.step_id`, planID)
	if err != nil {
		return nil, storeErr("get plan", err)
	}
	defer rows.Close()
	var p *persistence.PlanState
	for rows.Next() {
		var st persistence.PlanState
		var phase, count sql.NullInt64
		var step sql.NullString
		if err := rows.Scan(&st.MaxRetries, &st.ErrorDetailsJSON, &st.NextSequence, &phase, &step, &count); err != nil {
			return nil, storeErr("get plan", err)
		}
		if p == nil {
			st.PlanID = planID
			p = &st
		}
		if step.Valid {
			p.StepRetries = append(p.StepRetries, persistence.StepRetry{
				Phase: planv1.Phase(phase.Int64), StepID: step.String, Count: int32(count.Int64)})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr("get plan", err)
	}
	if p == nil {
		return nil, errs.NotFound("plan %s not found", planID)
	}
	return p, nil
}

func (r *reader) PlanHistory(ctx context.Context, f persistence.PlanFilter) ([]*planv1.ErrorRecord, error) {
	where := []string{"plan_id = ?", "sequence >= ?"}
	args := []any{f.PlanID, f.FromSequence}
	if f.Phase != planv1.Phase_PHASE_UNSPECIFIED {
		where, args = append(where, "phase = ?"), append(args, int64(f.Phase))
	}
	if f.Category != planv1.ErrorCategory_ERROR_CATEGORY_UNSPECIFIED {
		where, args = append(where, "category = ?"), append(args, int64(f.Category))
	}
	rows, err := r.db.QueryContext(ctx, `SELECT record_id, sequence, phase, step_id, error_type, message, tool,
		actor_name, stack_summary, attributes_json, category, is_retriable, retry_count, max_retries,
		recovery_action, recovery_hint, recovery_command, recorded_at FROM plan_errors`+
		whereClause(where)+` ORDER BY sequence LIMIT ?`, append(args, persistence.ClampLimit(f.Limit))...)
	if err != nil {
		return nil, storeErr("plan history", err)
	}
	defer rows.Close()
	var out []*planv1.ErrorRecord
	for rows.Next() {
		e := &planv1.ErrorRecord{PlanId: f.PlanID}
		var phase, category, action, recorded int64
		if err := rows.Scan(&e.RecordId, &e.Sequence, &phase, &e.StepId, &e.ErrorType, &e.Message, &e.Tool,
			&e.ActorName, &e.StackSummary, &e.AttributesJson, &category, &e.IsRetriable, &e.RetryCount,
			&e.MaxRetries, &action, &e.RecoveryHint, &e.RecoveryCommand, &recorded); err != nil {
			return nil, storeErr("plan history", err)
		}
		e.Phase, e.Category = planv1.Phase(phase), planv1.ErrorCategory(category)
		e.RecoveryAction, e.RecordedAt = planv1.RecoveryAction(action), persistence.Stamp(recorded)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr("plan history", err)
	}
	return out, nil
}

const auditColumns = `position, event_id, event_type, plan_id, session_id, project_name, actor_name,
	user_identity, details_json, created_at, prev_hash, hash`

// auditWhere turns a filter into conditions. The optional columns repeat
// their partial index's condition (not empty) so the planner can use it.
func auditWhere(f *auditv1.Filter) ([]string, []any) {
	var where []string
	var args []any
	if v := f.GetEventType(); v != "" {
		where, args = append(where, "event_type = ?"), append(args, v)
	}
	if v := f.GetPlanId(); v != "" {
		where, args = append(where, "plan_id = ? AND plan_id != ''"), append(args, v)
	}
	if v := f.GetSessionId(); v != "" {
		where, args = append(where, "session_id = ? AND session_id != ''"), append(args, v)
	}
	if v := f.GetActorName(); v != "" {
		where, args = append(where, "actor_name = ? AND actor_name != ''"), append(args, v)
	}
	if f.GetSince() != nil {
		where, args = append(where, "created_at >= ?"), append(args, persistence.BoundNanos(f.GetSince().AsTime()))
	}
	if f.GetUntil() != nil {
		where, args = append(where, "created_at < ?"), append(args, persistence.BoundNanos(f.GetUntil().AsTime()))
	}
	return where, args
}

// listAuditQuery is ListAudit's statement and arguments.
func listAuditQuery(f *auditv1.Filter, afterEventID string, limit int) (string, []any) {
	where, args := auditWhere(f)
	if afterEventID != "" {
		// A missing cursor makes the subquery NULL and matches nothing; an
		// empty page is then told apart from NOT_FOUND in ListAudit.
		where = append(where, "position > (SELECT position FROM audit_log WHERE event_id = ?)")
		args = append(args, afterEventID)
	}
	return "SELECT " + auditColumns + " FROM audit_log" + whereClause(where) + " ORDER BY position LIMIT ?",
		append(args, persistence.ClampLimit(limit))
}

// countAuditQuery is CountAudit's statement and arguments.
func countAuditQuery(f *auditv1.Filter) (string, []any) {
	where, args := auditWhere(f)
	return "SELECT COUNT(*) FROM audit_log" + whereClause(where), args
}

func (r *reader) ListAudit(ctx context.Context, f *auditv1.Filter, afterEventID string, limit int) ([]*auditv1.AuditEntry, error) {
	query, args := listAuditQuery(f, afterEventID, limit)
	out, err := r.audit(ctx, query, args...)
	if err != nil || len(out) > 0 || afterEventID == "" {
		return out, err
	}
	if _, err := r.GetAudit(ctx, afterEventID); err != nil {
		return nil, err
	}
	return out, nil
}

func (r *reader) CountAudit(ctx context.Context, f *auditv1.Filter) (int64, error) {
	query, args := countAuditQuery(f)
	var n int64
	err := r.db.QueryRowContext(ctx, query, args...).Scan(&n)
	return n, storeErr("count audit", err)
}

func (r *reader) GetAudit(ctx context.Context, eventID string) (*auditv1.AuditEntry, error) {
	out, err := r.audit(ctx, "SELECT "+auditColumns+" FROM audit_log WHERE event_id = ?", eventID)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errs.NotFound("audit entry %s not found", eventID)
	}
	return out[0], nil
}

func (r *reader) ScanAudit(ctx context.Context, afterPosition int64, limit int) ([]*auditv1.AuditEntry, error) {
	return r.audit(ctx, "SELECT "+auditColumns+" FROM audit_log WHERE position > ? ORDER BY position LIMIT ?",
		afterPosition, persistence.ClampLimit(limit))
}

func (r *reader) AuditAnchor(ctx context.Context) (string, error) {
	var hash string
	err := r.db.QueryRowContext(ctx, `SELECT anchor_hash FROM audit_meta WHERE id = 1`).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return hash, storeErr("audit anchor", err)
}

func (r *reader) audit(ctx context.Context, query string, args ...any) ([]*auditv1.AuditEntry, error) {
	rows, err := r.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, storeErr("read audit", err)
	}
	defer rows.Close()
	var out []*auditv1.AuditEntry
	for rows.Next() {
		e := &auditv1.AuditEntry{}
		var created int64
		if err := rows.Scan(&e.Position, &e.EventId, &e.EventType, &e.PlanId, &e.SessionId, &e.ProjectName,
			&e.ActorName, &e.UserIdentity, &e.DetailsJson, &created, &e.PrevHash, &e.Hash); err != nil {
			return nil, storeErr("read audit", err)
		}
		e.CreatedAt = persistence.Stamp(created)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr("read audit", err)
	}
	return out, nil
}
