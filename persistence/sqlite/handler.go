package sqlite

import "github.com/agentstate/agentstate/persistence"

// The applier is the persistence.Handler of a SQLite transaction: Dispatch
// picks the method; each is defined beside its SQL (fencing.go,
// sessions.go, appends.go, retention.go, plans.go, audit.go), except this
// one.

func (a *applier) RecordAudit(c *persistence.RecordAudit) (persistence.Result, error) {
	return persistence.Result{}, a.Audit(c.Entries)
}
