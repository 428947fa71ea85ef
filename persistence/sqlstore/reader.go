package sqlstore

import (
	"context"
	"strings"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// Own is the part of persistence.Reader whose SQL is a store's own: the
// sessions with their links, the pages of messages, the audit chain's
// anchor and bounds.
type Own interface {
	GetSession(ctx context.Context, sessionID string) (*sessionv1.Session, error)
	ListSessions(ctx context.Context, f persistence.SessionFilter) ([]*sessionv1.Session, error)
	persistence.MessageReader
	persistence.ItemReader
	AuditAnchor(ctx context.Context) (string, error)
	AuditBounds(ctx context.Context) (anchor, head int64, err error)
}

// Reader is a store's persistence.Reader: its Own methods, and the rest,
// whose statements both stores run as they are but for their
// placeholders. Each method is one statement (ListAudit may add a second
// to tell an unknown cursor from an empty page).
type Reader struct {
	Own
	DB DB
	// The statements, in the dialect's placeholders (Rebind).
	getPlan, getAudit, scanAudit, sessionState, scope, snapshot, findSession, listExpired string
}

var _ persistence.Reader = (*Reader)(nil)

// NewReader returns the reader of a store whose read pool is db.
func NewReader(db DB, own Own) *Reader {
	return &Reader{Own: own, DB: db,
		getPlan: Rebind(db, `SELECT p.max_retries, p.error_details_json,
		(SELECT COALESCE(MAX(e.sequence) + 1, 0) FROM plan_errors e WHERE e.namespace = p.namespace AND e.plan_id = p.plan_id),
		s.phase, s.step_id, s.count
		FROM plans p LEFT JOIN plan_step_retries s ON s.namespace = p.namespace AND s.plan_id = p.plan_id
		WHERE p.namespace = ? AND p.plan_id = ? ORDER BY s.phase, s.step_id`),
		getAudit:     Rebind(db, "SELECT "+AuditColumns+" FROM audit_log WHERE event_id = ?"),
		scanAudit:    Rebind(db, "SELECT "+AuditColumns+" FROM audit_log WHERE position > ? ORDER BY position LIMIT ?"),
		sessionState: Rebind(db, `SELECT state_json, next_sequence FROM sessions WHERE session_id = ? AND state != ?`),
		scope:        Rebind(db, `SELECT state_json, updated_at FROM state_scopes WHERE scope = ?`),
		snapshot:     Rebind(db, `SELECT sequence, data, created_at FROM session_snapshots WHERE session_id = ?`),
		findSession: Rebind(db, `SELECT session_id FROM sessions WHERE namespace = ? AND client_key = ? AND client_key <> ''
		AND state != ?`),
		listExpired: Rebind(db, `SELECT session_id FROM sessions WHERE expires_at <> 0 AND expires_at <= ?
		AND state != ? ORDER BY expires_at LIMIT ?`),
	}
}

// Rebind turns the ? placeholders of query into d's, numbered in order
// (the statements it is given have no ? of their own).
func Rebind(d Dialect, query string) string {
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteString(d.Arg(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// staged is the session state that readers never see.
const staged = int64(persistence.SessionStateStaged)

// rows runs query and collects one value per row, made by each after the
// row was scanned into dest.
func rows[T any](ctx context.Context, db DB, op, query string, args, dest []any, each func() T) ([]T, error) {
	var out []T
	err := db.Query(ctx, query, args, dest, func() error {
		out = append(out, each())
		return nil
	})
	if err != nil {
		return nil, db.Err(op, err)
	}
	return out, nil
}

// SessionsQuery is ListSessions' inner query (the sessions of a page, in
// id order) and its parameters; the store wraps it in its own select of
// the sessions with their links.
func SessionsQuery(d Dialect, f persistence.SessionFilter) (string, []any) {
	w := NewWhere(d)
	if f.AfterID != "" {
		w.Cond("session_id > " + w.Arg(f.AfterID))
	}
	if f.ActorName != "" {
		w.Cond("actor_name = " + w.Arg(f.ActorName))
	}
	if f.Namespace != "" {
		w.Cond("namespace = " + w.Arg(f.Namespace))
	}
	if f.State != sessionv1.SessionState_SESSION_STATE_UNSPECIFIED {
		w.Cond("state = " + w.Arg(int64(f.State)))
	} else {
		w.Cond("state != " + w.Arg(staged))
	}
	return "SELECT * FROM sessions" + w.Clause() + " ORDER BY session_id LIMIT " + w.Arg(persistence.ClampLimit(f.Limit)), w.Args()
}

func (r *Reader) GetPlan(ctx context.Context, ns, planID string) (*persistence.PlanState, error) {
	ns = persistence.PlanNamespace(ns)
	var p *persistence.PlanState
	var maxRetries, next int64
	var details string
	var phase, count *int64
	var step *string
	err := r.DB.Query(ctx, r.getPlan, []any{ns, planID},
		[]any{&maxRetries, &details, &next, &phase, &step, &count}, func() error {
			if p == nil {
				p = &persistence.PlanState{Namespace: ns, PlanID: planID, MaxRetries: int32(maxRetries), NextSequence: next, ErrorDetailsJSON: details}
			}
			if step != nil {
				p.StepRetries = append(p.StepRetries, persistence.StepRetry{
					Phase: planv1.Phase(*phase), StepID: *step, Count: int32(*count)})
			}
			return nil
		})
	if err != nil {
		return nil, r.DB.Err("get plan", err)
	}
	if p == nil {
		return nil, errs.NotFound("plan %s not found", planID)
	}
	return p, nil
}

func (r *Reader) PlanHistory(ctx context.Context, f persistence.PlanFilter) ([]*planv1.ErrorRecord, error) {
	w := NewWhere(r.DB)
	w.Cond("namespace = " + w.Arg(persistence.PlanNamespace(f.Namespace)))
	w.Cond("plan_id = " + w.Arg(f.PlanID))
	w.Cond("sequence >= " + w.Arg(f.FromSequence))
	if f.Phase != planv1.Phase_PHASE_UNSPECIFIED {
		w.Cond("phase = " + w.Arg(int64(f.Phase)))
	}
	if f.Category != planv1.ErrorCategory_ERROR_CATEGORY_UNSPECIFIED {
		w.Cond("category = " + w.Arg(int64(f.Category)))
	}
	query := "SELECT " + RecordColumns + " FROM plan_errors" + w.Clause() + " ORDER BY sequence LIMIT " + w.Arg(persistence.ClampLimit(f.Limit))
	row := newRecordRow()
	return rows(ctx, r.DB, "plan history", query, w.Args(), row.dest, row.record)
}

// auditWhere turns a filter into conditions. The optional columns repeat
// their partial index's condition (not empty) so the planner may use it.
func auditWhere(w *Where, f *auditv1.Filter) {
	if v := f.GetEventType(); v != "" {
		w.Cond("event_type = " + w.Arg(v))
	}
	if v := f.GetPlanId(); v != "" {
		w.Cond("plan_id = " + w.Arg(v) + " AND plan_id <> ''")
	}
	if v := f.GetSessionId(); v != "" {
		w.Cond("session_id = " + w.Arg(v) + " AND session_id <> ''")
	}
	if v := f.GetActorName(); v != "" {
		w.Cond("actor_name = " + w.Arg(v) + " AND actor_name <> ''")
	}
	if v := f.GetPrincipal(); v != "" {
		w.Cond("principal = " + w.Arg(v) + " AND principal <> ''")
	}
	if v := f.GetNamespace(); v != "" {
		w.Cond(namespaceCond(w, v))
	}
	if f.GetSince() != nil {
		w.Cond("created_at >= " + w.Arg(persistence.BoundNanos(f.GetSince().AsTime())))
	}
	if f.GetUntil() != nil {
		w.Cond("created_at < " + w.Arg(persistence.BoundNanos(f.GetUntil().AsTime())))
	}
}

// namespaceCond selects the entries of namespace ns. Its index holds only
// the entries outside the default namespace, so for those the condition
// repeats the index's; the default one's entries are found in commit order
// (on a single-tenant node nearly every entry is one).
func namespaceCond(w *Where, ns string) string {
	if ns == persistence.DefaultNamespace {
		return "namespace = " + w.Arg(ns)
	}
	return "namespace = " + w.Arg(ns) + " AND namespace <> '" + persistence.DefaultNamespace + "'"
}

// ListAuditQuery is ListAudit's statement and parameters.
func ListAuditQuery(d Dialect, f *auditv1.Filter, afterEventID string, limit int) (string, []any) {
	w := NewWhere(d)
	auditWhere(w, f)
	if afterEventID != "" {
		// A missing cursor makes the subquery NULL and matches nothing; an
		// empty page is then told apart from NOT_FOUND in ListAudit.
		w.Cond("position > (SELECT position FROM audit_log WHERE event_id = " + w.Arg(afterEventID) + ")")
	}
	return "SELECT " + AuditColumns + " FROM audit_log" + w.Clause() + " ORDER BY position LIMIT " + w.Arg(persistence.ClampLimit(limit)), w.Args()
}

// CountAuditQuery is CountAudit's statement and parameters.
func CountAuditQuery(d Dialect, f *auditv1.Filter) (string, []any) {
	w := NewWhere(d)
	auditWhere(w, f)
	return "SELECT COUNT(*) FROM audit_log" + w.Clause(), w.Args()
}

func (r *Reader) ListAudit(ctx context.Context, f *auditv1.Filter, afterEventID string, limit int) ([]*auditv1.AuditEntry, error) {
	query, args := ListAuditQuery(r.DB, f, afterEventID, limit)
	out, err := r.audit(ctx, query, args...)
	if err != nil || len(out) > 0 || afterEventID == "" {
		return out, err
	}
	if _, err := r.GetAudit(ctx, afterEventID); err != nil {
		return nil, err
	}
	return out, nil
}

func (r *Reader) CountAudit(ctx context.Context, f *auditv1.Filter) (int64, error) {
	query, args := CountAuditQuery(r.DB, f)
	var n int64
	err := r.DB.QueryRow(ctx, query, args, []any{&n})
	return n, r.DB.Err("count audit", err)
}

func (r *Reader) GetAudit(ctx context.Context, eventID string) (*auditv1.AuditEntry, error) {
	out, err := r.audit(ctx, r.getAudit, eventID)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errs.NotFound("audit entry %s not found", eventID)
	}
	return out[0], nil
}

func (r *Reader) ScanAudit(ctx context.Context, afterPosition int64, limit int) ([]*auditv1.AuditEntry, error) {
	return r.audit(ctx, r.scanAudit, afterPosition, persistence.ClampLimit(limit))
}

func (r *Reader) FeedAudit(ctx context.Context, f *persistence.FeedFilter, after, upto int64, limit int) ([]*auditv1.AuditEntry, error) {
	w := NewWhere(r.DB)
	w.Cond("position > " + w.Arg(after))
	w.Cond("position <= " + w.Arg(upto))
	if f != nil {
		if len(f.EventTypes) > 0 {
			w.In("event_type", f.EventTypes)
		}
		// The optional columns repeat their partial index's condition.
		if f.SessionID != "" {
			w.Cond("session_id = " + w.Arg(f.SessionID) + " AND session_id <> ''")
		}
		if f.PlanID != "" {
			w.Cond("plan_id = " + w.Arg(f.PlanID) + " AND plan_id <> ''")
		}
		if f.ActorName != "" {
			w.Cond("actor_name = " + w.Arg(f.ActorName) + " AND actor_name <> ''")
		}
		if f.Principal != "" {
			w.Cond("principal = " + w.Arg(f.Principal) + " AND principal <> ''")
		}
		if f.Namespace != "" {
			w.Cond(namespaceCond(w, f.Namespace))
		}
	}
	return r.audit(ctx, "SELECT "+AuditColumns+" FROM audit_log"+w.Clause()+
		" ORDER BY position LIMIT "+w.Arg(persistence.ClampLimit(limit)), w.Args()...)
}

func (r *Reader) audit(ctx context.Context, query string, args ...any) ([]*auditv1.AuditEntry, error) {
	row := newAuditRow()
	return rows(ctx, r.DB, "read audit", query, args, row.dest, row.entry)
}

func (r *Reader) GetSessionState(ctx context.Context, sessionID string) (string, int64, error) {
	var state string
	var next int64
	err := r.DB.QueryRow(ctx, r.sessionState, []any{sessionID, staged}, []any{&state, &next})
	if r.DB.NoRows(err) {
		return "", 0, errs.NotFound("session %s not found", sessionID)
	}
	if err != nil {
		return "", 0, r.DB.Err("read session state", err)
	}
	return state, next, nil
}

func (r *Reader) GetScopes(ctx context.Context, names []string) ([]*sessionv1.ScopeState, error) {
	out := make([]*sessionv1.ScopeState, len(names))
	for i, n := range names {
		s := &sessionv1.ScopeState{Scope: n, StateJson: persistence.EmptyState}
		var at int64
		err := r.DB.QueryRow(ctx, r.scope, []any{n}, []any{&s.StateJson, &at})
		if err != nil && !r.DB.NoRows(err) {
			return nil, r.DB.Err("read scopes", err)
		}
		if err == nil {
			s.UpdatedAt = persistence.Stamp(at)
		}
		out[i] = s
	}
	return out, nil
}

func (r *Reader) GetSnapshot(ctx context.Context, sessionID string) (*sessionv1.Snapshot, error) {
	s := &sessionv1.Snapshot{}
	var created int64
	err := r.DB.QueryRow(ctx, r.snapshot, []any{sessionID}, []any{&s.Sequence, &s.Data, &created})
	if r.DB.NoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, r.DB.Err("read snapshot", err)
	}
	s.CreatedAt = persistence.Stamp(created)
	return s, nil
}

func (r *Reader) FindSession(ctx context.Context, namespace, clientKey string) (string, error) {
	var id string
	err := r.DB.QueryRow(ctx, r.findSession, []any{namespace, clientKey, staged}, []any{&id})
	if r.DB.NoRows(err) {
		return "", errs.NotFound("no session has client key %q in namespace %q", clientKey, namespace)
	}
	if err != nil {
		return "", r.DB.Err("find session", err)
	}
	return id, nil
}

func (r *Reader) ListExpired(ctx context.Context, now time.Time, limit int) ([]string, error) {
	var id string
	return rows(ctx, r.DB, "list expired", r.listExpired, []any{persistence.BoundNanos(now), staged, persistence.ClampLimit(limit)}, []any{&id}, func() string { return id })
}

// Window is the range of a filtered message read (ListMessagesWhere): the
// order in which to read, how many rows, the byte cap of the page (none for
// the last Last messages) and the event-time bounds, open ends made the
// extremes.
func Window(f persistence.MessageFilter) (order string, limit int, capBytes, after, before int64) {
	order, limit, capBytes = "ASC", persistence.ClampLimit(f.Limit), int64(persistence.MaxPageBytes)
	if f.Last > 0 {
		order, limit, capBytes = "DESC", persistence.ClampLimit(f.Last), 1<<62
	}
	after, before = f.After, f.Before
	if before == 0 {
		before = 1<<63 - 1
	}
	if after == 0 {
		after = -1 << 63
	}
	return order, limit, capBytes, after, before
}
