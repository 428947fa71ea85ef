package audit

import (
	"sort"

	"github.com/agentstate/agentstate/messages/errs"
)

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
	EventSessionTruncated  = "session_truncated"
	EventSessionRewound    = "session_rewound"
	EventScopesUpdated     = "scopes_updated"
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
	EventPlanRetryReset: true, EventAuditPruned: true, EventSessionTruncated: true,
	EventSessionRewound: true, EventScopesUpdated: true,
}

// reserved is agentstate's own event types: each one attests a state change
// agentstate made and committed with it, so a caller's Record of one (a
// session_deleted for a session that never existed) would forge that
// attestation. NewEntry builds them for the actors; Record refuses them.
var reserved = map[string]bool{
	EventSessionClosed: true, EventSessionDeleted: true, EventMessageAppended: true,
	EventTokenUsageUpdated: true, EventPlanLinked: true, EventSessionImported: true,
	EventSessionExported: true, EventPlanErrorRecorded: true, EventPlanPolicySet: true,
	EventPlanRetryReset: true, EventAuditPruned: true, EventSessionTruncated: true,
	EventSessionRewound: true, EventScopesUpdated: true,
}

// ReservedEventType reports whether t is written by agentstate only.
func ReservedEventType(t string) bool { return reserved[t] }

// checkCallerEventType refuses a reserved type in a caller's Record.
func checkCallerEventType(t string) error {
	if reserved[t] {
		return errs.InvalidArgument("event_type %q is written by agentstate only, with the change it records; "+
			"record one of the caller event types instead", t)
	}
	return nil
}

// KnownEventType reports whether t is in the registry.
func KnownEventType(t string) bool { return registry[t] }

// EventTypes returns the registry, sorted.
func EventTypes() []string { return eventTypes(func(string) bool { return true }) }

// CallerEventTypes returns the event types a caller may Record, sorted.
func CallerEventTypes() []string { return eventTypes(func(t string) bool { return !reserved[t] }) }

// ReservedEventTypes returns agentstate's own event types, sorted: a
// caller's Record of one is INVALID_ARGUMENT.
func ReservedEventTypes() []string { return eventTypes(ReservedEventType) }

func eventTypes(keep func(string) bool) []string {
	out := make([]string, 0, len(registry))
	for t := range registry {
		if keep(t) {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}
