package audit

import "sort"

// The event types of the original platform's audit subscriber.
const (
	EventPlanApplied       = "plan_applied"
	EventPlanCancelled     = "plan_cancelled"
	EventResourceModified  = "resource_modified"
	EventCorrectionApplied = "correction_applied"
	EventConfigChanged     = "config_changed"
	EventEntityDeleted     = "entity_deleted"
	EventSessionCreated    = "session_created"
	EventAuthSuccess       = "auth_success"
	EventAuthFailure       = "auth_failure"
)

// agentstate's own event types: every state change it makes is recorded
// with one of these, committed in the same transaction as the change.
const (
	EventSessionClosed     = "session_closed"
	EventSessionDeleted    = "session_deleted"
	EventMessageAppended   = "message_appended"
	EventTokenUsageUpdated = "token_usage_updated"
	EventPlanLinked        = "plan_linked"
	EventSessionImported   = "session_imported"
	EventSessionExported   = "session_exported"
	EventPlanErrorRecorded = "plan_error_recorded"
	EventPlanPolicySet     = "plan_policy_set"
	EventPlanRetryReset    = "plan_retry_reset"
	EventAuditPruned       = "audit_pruned"
)

// registry is every event type Record and NewEntry accept. It is never
// written after init, so concurrent reads need no lock.
var registry = map[string]bool{
	EventPlanApplied: true, EventPlanCancelled: true, EventResourceModified: true,
	EventCorrectionApplied: true, EventConfigChanged: true, EventEntityDeleted: true,
	EventSessionCreated: true, EventAuthSuccess: true, EventAuthFailure: true,

	EventSessionClosed: true, EventSessionDeleted: true, EventMessageAppended: true,
	EventTokenUsageUpdated: true, EventPlanLinked: true, EventSessionImported: true,
	EventSessionExported: true, EventPlanErrorRecorded: true, EventPlanPolicySet: true,
	EventPlanRetryReset: true, EventAuditPruned: true,
}

// KnownEventType reports whether t is in the registry.
func KnownEventType(t string) bool { return registry[t] }

// EventTypes returns the registry, sorted.
func EventTypes() []string {
	out := make([]string, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
