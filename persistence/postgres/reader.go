package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// reader runs every query on the read-only pool. Each method is one
// statement (ListAudit may add a second to tell an unknown cursor from an
// empty page), so it sees what was committed when the statement began and
// holds no snapshot after it returns.
type reader struct {
	pool *pgxpool.Pool
}

var _ persistence.Reader = (*reader)(nil)

// query collects conditions and their numbered parameters.
type query struct {
	where []string
	args  []any
}

// arg adds a parameter and returns its placeholder.
func (q *query) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

func (q *query) cond(c string) { q.where = append(q.where, c) }

func (q *query) whereClause() string {
	if len(q.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(q.where, " AND ")
}

// sessionSelect yields one row per (session, linked plan), sessions in id
// order and links in insertion order; a session without links has one row
// with NULL link columns. The inner query picks the sessions.
const sessionSelect = `SELECT s.session_id, s.actor_name, s.namespace, s.automation, s.metadata_json, s.state,
	s.input_tokens, s.output_tokens, s.cost, s.created_at, s.updated_at, s.closed_at, s.next_sequence,
	s.client_key, s.expires_at, s.first_sequence, l.plan_id, l.phase, l.state
	FROM (%s) s LEFT JOIN session_links l ON l.session_id = s.session_id
	ORDER BY s.session_id, l.id`

func (r *reader) sessions(ctx context.Context, inner string, args ...any) ([]*sessionv1.Session, error) {
	rows, err := r.pool.Query(ctx, strings.Replace(sessionSelect, "%s", inner, 1), args...)
	if err != nil {
		return nil, storeErr("read sessions", err)
	}
	var out []*sessionv1.Session
	var cur *sessionv1.Session
	var id, actor, ns, automation, meta, key string
	var state, in, outTokens, created, updated, closed, count, expires, first int64
	var cost float64
	var planID, phase, lstate *string
	_, err = pgx.ForEachRow(rows, []any{&id, &actor, &ns, &automation, &meta, &state, &in, &outTokens, &cost,
		&created, &updated, &closed, &count, &key, &expires, &first, &planID, &phase, &lstate}, func() error {
		if cur == nil || cur.SessionId != id {
			cur = &sessionv1.Session{SessionId: id, ActorName: actor, Namespace: ns, Automation: automation,
				MetadataJson: meta, State: sessionv1.SessionState(state),
				TokenUsage: &sessionv1.TokenUsage{InputTokens: in, OutputTokens: outTokens, Cost: persistence.ReadableCost(cost)},
				CreatedAt:  persistence.Stamp(created), UpdatedAt: persistence.Stamp(updated), ClosedAt: persistence.Stamp(closed), MessageCount: count,
				ClientKey: key, ExpiresAt: persistence.Stamp(expires), FirstSequence: first}
			out = append(out, cur)
		}
		if planID != nil {
			cur.LinkedPlans = append(cur.LinkedPlans, &sessionv1.LinkedPlan{PlanId: *planID, Phase: *phase, State: *lstate})
		}
		return nil
	})
	if err != nil {
		return nil, storeErr("read sessions", err)
	}
	return out, nil
}

func (r *reader) GetSession(ctx context.Context, sessionID string) (*sessionv1.Session, error) {
	out, err := r.sessions(ctx, `SELECT * FROM sessions WHERE session_id = $1 AND state != $2`, sessionID, int64(persistence.SessionStateStaged))
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errs.NotFound("session %s not found", sessionID)
	}
	return out[0], nil
}

func (r *reader) ListSessions(ctx context.Context, f persistence.SessionFilter) ([]*sessionv1.Session, error) {
	var q query
	if f.AfterID != "" {
		q.cond("session_id > " + q.arg(f.AfterID))
	}
	if f.ActorName != "" {
		q.cond("actor_name = " + q.arg(f.ActorName))
	}
	if f.Namespace != "" {
		q.cond("namespace = " + q.arg(f.Namespace))
	}
	if f.State != sessionv1.SessionState_SESSION_STATE_UNSPECIFIED {
		q.cond("state = " + q.arg(int64(f.State)))
	} else {
		q.cond("state != " + q.arg(int64(persistence.SessionStateStaged)))
	}
	inner := "SELECT * FROM sessions" + q.whereClause() + " ORDER BY session_id LIMIT " + q.arg(persistence.ClampLimit(f.Limit))
	return r.sessions(ctx, inner, q.args...)
}

func (r *reader) ListMessages(ctx context.Context, sessionID string, from int64, limit int) ([]*sessionv1.Message, error) {
	// The byte cap is applied by the server: a row past it is never sent
	// (pgx would have to read to the end of a result it stopped using).
	// octet_length of a stored value reads its size, not the value.
	rows, err := r.pool.Query(ctx, `SELECT sequence, message_id, role, content, metadata_json, created_at, event_at
		FROM (SELECT sequence, message_id, role, content, metadata_json, created_at, event_at,
			sum(octet_length(content) + octet_length(metadata_json) + $4) OVER (ORDER BY sequence) AS upto
			FROM session_messages WHERE session_id = $1 AND sequence >= $2
			AND NOT EXISTS (SELECT 1 FROM sessions WHERE session_id = $1 AND state = $6)
			ORDER BY sequence LIMIT $3) page
		WHERE upto <= $5 OR sequence = (SELECT min(sequence) FROM session_messages WHERE session_id = $1 AND sequence >= $2)
		ORDER BY sequence`,
		sessionID, from, persistence.ClampLimit(limit), persistence.MessageOverhead, persistence.MaxPageBytes, int64(persistence.SessionStateStaged))
	if err != nil {
		return nil, storeErr("list messages", err)
	}
	var out []*sessionv1.Message
	var m sessionv1.Message
	var role, created, event int64
	_, err = pgx.ForEachRow(rows, []any{&m.Sequence, &m.MessageId, &role, &m.Content, &m.MetadataJson, &created, &event}, func() error {
		out = append(out, &sessionv1.Message{SessionId: sessionID, Sequence: m.Sequence, MessageId: m.MessageId,
			Role: sessionv1.Role(role), Content: m.Content, MetadataJson: m.MetadataJson, CreatedAt: persistence.Stamp(created),
			EventTime: persistence.Stamp(event)})
		return nil
	})
	if err != nil {
		return nil, storeErr("list messages", err)
	}
	return out, nil
}

func (r *reader) GetPlan(ctx context.Context, planID string) (*persistence.PlanState, error) {
	rows, err := r.pool.Query(ctx, `SELECT p.max_retries, p.error_details_json,
		(SELECT COALESCE(MAX(e.sequence) + 1, 0) FROM plan_errors e WHERE e.plan_id = p.plan_id),
		s.phase, s.step_id, s.count
		FROM plans p LEFT JOIN plan_step_retries s ON s.plan_id = p.plan_id
		WHERE p.plan_id = $1 ORDER BY s.phase, s.step_id`, planID)
	if err != nil {
		return nil, storeErr("get plan", err)
	}
	var p *persistence.PlanState
	var maxRetries, next int64
	var details string
	var phase, count *int64
	var step *string
	_, err = pgx.ForEachRow(rows, []any{&maxRetries, &details, &next, &phase, &step, &count}, func() error {
		if p == nil {
			p = &persistence.PlanState{PlanID: planID, MaxRetries: int32(maxRetries), NextSequence: next, ErrorDetailsJSON: details}
		}
		if step != nil {
			p.StepRetries = append(p.StepRetries, persistence.StepRetry{
				Phase: planv1.Phase(*phase), StepID: *step, Count: int32(*count)})
		}
		return nil
	})
	if err != nil {
		return nil, storeErr("get plan", err)
	}
	if p == nil {
		return nil, errs.NotFound("plan %s not found", planID)
	}
	return p, nil
}

func (r *reader) PlanHistory(ctx context.Context, f persistence.PlanFilter) ([]*planv1.ErrorRecord, error) {
	var q query
	q.cond("plan_id = " + q.arg(f.PlanID))
	q.cond("sequence >= " + q.arg(f.FromSequence))
	if f.Phase != planv1.Phase_PHASE_UNSPECIFIED {
		q.cond("phase = " + q.arg(int64(f.Phase)))
	}
	if f.Category != planv1.ErrorCategory_ERROR_CATEGORY_UNSPECIFIED {
		q.cond("category = " + q.arg(int64(f.Category)))
	}
	rows, err := r.pool.Query(ctx, `SELECT record_id, sequence, phase, step_id, error_type, message, tool,
		actor_name, stack_summary, attributes_json, category, is_retriable, retry_count, max_retries,
		recovery_action, recovery_hint, recovery_command, recorded_at FROM plan_errors`+
		q.whereClause()+` ORDER BY sequence LIMIT `+q.arg(persistence.ClampLimit(f.Limit)), q.args...)
	if err != nil {
		return nil, storeErr("plan history", err)
	}
	var out []*planv1.ErrorRecord
	var e planv1.ErrorRecord
	var phase, category, retries, maxes, action, recorded int64
	_, err = pgx.ForEachRow(rows, []any{&e.RecordId, &e.Sequence, &phase, &e.StepId, &e.ErrorType, &e.Message, &e.Tool,
		&e.ActorName, &e.StackSummary, &e.AttributesJson, &category, &e.IsRetriable, &retries, &maxes,
		&action, &e.RecoveryHint, &e.RecoveryCommand, &recorded}, func() error {
		out = append(out, &planv1.ErrorRecord{RecordId: e.RecordId, PlanId: f.PlanID, Sequence: e.Sequence,
			Phase: planv1.Phase(phase), StepId: e.StepId, ErrorType: e.ErrorType, Message: e.Message, Tool: e.Tool,
			ActorName: e.ActorName, StackSummary: e.StackSummary, AttributesJson: e.AttributesJson,
			Category: planv1.ErrorCategory(category), IsRetriable: e.IsRetriable, RetryCount: int32(retries),
			MaxRetries: int32(maxes), RecoveryAction: planv1.RecoveryAction(action), RecoveryHint: e.RecoveryHint,
			RecoveryCommand: e.RecoveryCommand, RecordedAt: persistence.Stamp(recorded)})
		return nil
	})
	if err != nil {
		return nil, storeErr("plan history", err)
	}
	return out, nil
}

const auditColumns = `position, event_id, event_type, plan_id, session_id, project_name, actor_name,
	user_identity, details_json, created_at, prev_hash, hash`

// auditWhere turns a filter into conditions. The optional columns repeat
// their partial index's condition (not empty) so the planner may use it.
func auditWhere(q *query, f *auditv1.Filter) {
	if v := f.GetEventType(); v != "" {
		q.cond("event_type = " + q.arg(v))
	}
	if v := f.GetPlanId(); v != "" {
		q.cond("plan_id = " + q.arg(v) + " AND plan_id <> ''")
	}
	if v := f.GetSessionId(); v != "" {
		q.cond("session_id = " + q.arg(v) + " AND session_id <> ''")
	}
	if v := f.GetActorName(); v != "" {
		q.cond("actor_name = " + q.arg(v) + " AND actor_name <> ''")
	}
	if f.GetSince() != nil {
		q.cond("created_at >= " + q.arg(persistence.BoundNanos(f.GetSince().AsTime())))
	}
	if f.GetUntil() != nil {
		q.cond("created_at < " + q.arg(persistence.BoundNanos(f.GetUntil().AsTime())))
	}
}

func (r *reader) ListAudit(ctx context.Context, f *auditv1.Filter, afterEventID string, limit int) ([]*auditv1.AuditEntry, error) {
	var q query
	auditWhere(&q, f)
	if afterEventID != "" {
		// A missing cursor makes the subquery NULL and matches nothing; an
		// empty page is then told apart from NOT_FOUND below.
		q.cond("position > (SELECT position FROM audit_log WHERE event_id = " + q.arg(afterEventID) + ")")
	}
	out, err := r.audit(ctx, "SELECT "+auditColumns+" FROM audit_log"+q.whereClause()+
		" ORDER BY position LIMIT "+q.arg(persistence.ClampLimit(limit)), q.args...)
	if err != nil || len(out) > 0 || afterEventID == "" {
		return out, err
	}
	if _, err := r.GetAudit(ctx, afterEventID); err != nil {
		return nil, err
	}
	return out, nil
}

func (r *reader) CountAudit(ctx context.Context, f *auditv1.Filter) (int64, error) {
	var q query
	auditWhere(&q, f)
	var n int64
	err := r.pool.QueryRow(ctx, "SELECT COUNT(*) FROM audit_log"+q.whereClause(), q.args...).Scan(&n)
	return n, storeErr("count audit", err)
}

func (r *reader) GetAudit(ctx context.Context, eventID string) (*auditv1.AuditEntry, error) {
	out, err := r.audit(ctx, "SELECT "+auditColumns+" FROM audit_log WHERE event_id = $1", eventID)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errs.NotFound("audit entry %s not found", eventID)
	}
	return out[0], nil
}

func (r *reader) ScanAudit(ctx context.Context, afterPosition int64, limit int) ([]*auditv1.AuditEntry, error) {
	return r.audit(ctx, "SELECT "+auditColumns+" FROM audit_log WHERE position > $1 ORDER BY position LIMIT $2",
		afterPosition, persistence.ClampLimit(limit))
}

func (r *reader) AuditAnchor(ctx context.Context) (string, error) {
	var hash string
	err := r.pool.QueryRow(ctx, `SELECT anchor_hash FROM audit_chain WHERE id = 1`).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errs.Internal("audit anchor: the chain row is missing")
	}
	return hash, storeErr("audit anchor", err)
}

func (r *reader) audit(ctx context.Context, sql string, args ...any) ([]*auditv1.AuditEntry, error) {
	rows, err := r.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, storeErr("read audit", err)
	}
	var out []*auditv1.AuditEntry
	var e auditv1.AuditEntry
	var created int64
	_, err = pgx.ForEachRow(rows, []any{&e.Position, &e.EventId, &e.EventType, &e.PlanId, &e.SessionId, &e.ProjectName,
		&e.ActorName, &e.UserIdentity, &e.DetailsJson, &created, &e.PrevHash, &e.Hash}, func() error {
		out = append(out, &auditv1.AuditEntry{Position: e.Position, EventId: e.EventId, EventType: e.EventType,
			PlanId: e.PlanId, SessionId: e.SessionId, ProjectName: e.ProjectName, ActorName: e.ActorName,
			UserIdentity: e.UserIdentity, DetailsJson: e.DetailsJson, CreatedAt: persistence.Stamp(created),
			PrevHash: e.PrevHash, Hash: e.Hash})
		return nil
	})
	if err != nil {
		return nil, storeErr("read audit", err)
	}
	return out, nil
}
