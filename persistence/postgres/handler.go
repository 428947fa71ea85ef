package postgres

import "github.com/agentstate/agentstate/persistence"

// The applier is the persistence.Handler of a PostgreSQL transaction:
// Dispatch picks the method; each is defined beside its SQL (fencing.go,
// sessions.go, appends.go, retention.go, state.go, plans.go, audit.go),
// except these.

// AppendMessages, UpdateSession and PlanWrite are pipelined (pipeline.go)
// in an attempt without savepoints, and run statement by statement in a
// replay.
func (a *applier) AppendMessages(c *persistence.AppendMessages) (persistence.Result, error) {
	if a.buffered {
		return a.pipeAppend(c)
	}
	return a.appendMessages(c)
}

func (a *applier) UpdateSession(c *persistence.UpdateSession) (persistence.Result, error) {
	if a.buffered {
		return a.pipeUpdate(c)
	}
	return a.updateSession(c)
}

func (a *applier) PlanWrite(c *persistence.PlanWrite) (persistence.Result, error) {
	if a.buffered {
		return a.pipePlanWrite(c)
	}
	return a.planWrite(c)
}

func (a *applier) RecordAudit(c *persistence.RecordAudit) (persistence.Result, error) {
	return persistence.Result{}, a.Audit(c.Entries)
}
