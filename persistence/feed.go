package persistence

import auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"

// FeedFilter selects the change feed's entries (Reader.FeedAudit); empty
// fields match everything. EventTypes matches any of its types.
type FeedFilter struct {
	EventTypes []string
	SessionID  string
	PlanID     string
	ActorName  string
	Principal  string
	Namespace  string
}

// Matches reports whether e passes the filter, as FeedAudit's WHERE
// clause decides it, for entries a feed takes from memory instead of the
// store.
func (f *FeedFilter) Matches(e *auditv1.AuditEntry) bool {
	if f == nil {
		return true
	}
	if f.SessionID != "" && e.GetSessionId() != f.SessionID ||
		f.PlanID != "" && e.GetPlanId() != f.PlanID ||
		f.ActorName != "" && e.GetActorName() != f.ActorName ||
		f.Principal != "" && e.GetPrincipal() != f.Principal ||
		f.Namespace != "" && e.GetNamespace() != f.Namespace {
		return false
	}
	eventType := e.GetEventType()
	if len(f.EventTypes) == 0 {
		return true
	}
	for _, t := range f.EventTypes {
		if t == eventType {
			return true
		}
	}
	return false
}
