package persistence

// FeedFilter selects the change feed's entries (Reader.FeedAudit); empty
// fields match everything. EventTypes matches any of its types.
type FeedFilter struct {
	EventTypes []string
	SessionID  string
	PlanID     string
	ActorName  string
}

// Matches reports whether e passes the filter, as FeedAudit's WHERE
// clause decides it, for entries a feed takes from memory instead of the
// store.
func (f *FeedFilter) Matches(eventType, sessionID, planID, actorName string) bool {
	if f == nil {
		return true
	}
	if f.SessionID != "" && sessionID != f.SessionID ||
		f.PlanID != "" && planID != f.PlanID ||
		f.ActorName != "" && actorName != f.ActorName {
		return false
	}
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
