package postgres

import "github.com/agentstate/agentstate/persistence"

// The applier is the persistence.Handler of a PostgreSQL transaction: Dispatch
// picks the method, these name the SQL that does the work.

func (a *applier) Activate(c *persistence.Activate) (persistence.Result, error) { return a.activate(c) }
func (a *applier) CreateSession(c *persistence.CreateSession) (persistence.Result, error) {
	return a.createSession(c)
}

// AppendMessages and UpdateSession are pipelined (pipeline.go) in an
// attempt without savepoints, and run statement by statement in a replay.
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

func (a *applier) DeleteSession(c *persistence.DeleteSession) (persistence.Result, error) {
	return a.deleteSession(c)
}
func (a *applier) PlanWrite(c *persistence.PlanWrite) (persistence.Result, error) {
	return a.planWrite(c)
}
func (a *applier) RecordAudit(c *persistence.RecordAudit) (persistence.Result, error) {
	return persistence.Result{}, a.audit(c.Entries)
}
func (a *applier) RecordClientAudit(c *persistence.RecordClientAudit) (persistence.Result, error) {
	return a.recordClientAudit(c)
}
func (a *applier) PruneAudit(c *persistence.PruneAudit) (persistence.Result, error) {
	return a.pruneAudit(c)
}
