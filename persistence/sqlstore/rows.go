package sqlstore

import (
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/persistence"
)

// AuditColumns are the columns of an audit_log row, in auditRow's order.
const AuditColumns = `position, event_id, event_type, plan_id, session_id, project_name, actor_name,
	user_identity, details_json, created_at, prev_hash, hash, principal, namespace`

// auditRow is the scan destination of one AuditColumns row.
type auditRow struct {
	e       auditv1.AuditEntry
	created int64
	dest    []any
}

func newAuditRow() *auditRow {
	r := &auditRow{}
	e := &r.e
	r.dest = []any{&e.Position, &e.EventId, &e.EventType, &e.PlanId, &e.SessionId, &e.ProjectName,
		&e.ActorName, &e.UserIdentity, &e.DetailsJson, &r.created, &e.PrevHash, &e.Hash, &e.Principal, &e.Namespace}
	return r
}

// entry is a new entry with the row's values.
func (r *auditRow) entry() *auditv1.AuditEntry {
	e := &r.e
	return &auditv1.AuditEntry{Position: e.Position, EventId: e.EventId, EventType: e.EventType,
		PlanId: e.PlanId, SessionId: e.SessionId, ProjectName: e.ProjectName, ActorName: e.ActorName,
		UserIdentity: e.UserIdentity, DetailsJson: e.DetailsJson, CreatedAt: persistence.Stamp(r.created),
		PrevHash: e.PrevHash, Hash: e.Hash, Principal: e.Principal, Namespace: e.Namespace}
}

// RecordColumns are the columns of a plan_errors row, in recordRow's order.
const RecordColumns = `record_id, namespace, plan_id, sequence, phase, step_id, error_type, message, tool,
	actor_name, stack_summary, attributes_json, category, is_retriable, retry_count, max_retries,
	recovery_action, recovery_hint, recovery_command, recorded_at`

// recordRow is the scan destination of one RecordColumns row.
type recordRow struct {
	e                                                 planv1.ErrorRecord
	phase, category, retries, maxes, action, recorded int64
	dest                                              []any
}

func newRecordRow() *recordRow {
	r := &recordRow{}
	e := &r.e
	r.dest = []any{&e.RecordId, &e.Namespace, &e.PlanId, &e.Sequence, &r.phase, &e.StepId, &e.ErrorType, &e.Message, &e.Tool,
		&e.ActorName, &e.StackSummary, &e.AttributesJson, &r.category, &e.IsRetriable, &r.retries, &r.maxes,
		&r.action, &e.RecoveryHint, &e.RecoveryCommand, &r.recorded}
	return r
}

// record is a new record with the row's values.
func (r *recordRow) record() *planv1.ErrorRecord {
	e := &r.e
	return &planv1.ErrorRecord{RecordId: e.RecordId, Namespace: e.Namespace, PlanId: e.PlanId, Sequence: e.Sequence,
		Phase: planv1.Phase(r.phase), StepId: e.StepId, ErrorType: e.ErrorType, Message: e.Message, Tool: e.Tool,
		ActorName: e.ActorName, StackSummary: e.StackSummary, AttributesJson: e.AttributesJson,
		Category: planv1.ErrorCategory(r.category), IsRetriable: e.IsRetriable, RetryCount: int32(r.retries),
		MaxRetries: int32(r.maxes), RecoveryAction: planv1.RecoveryAction(r.action), RecoveryHint: e.RecoveryHint,
		RecoveryCommand: e.RecoveryCommand, RecordedAt: persistence.Stamp(r.recorded)}
}
