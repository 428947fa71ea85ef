package postgres

import "github.com/agentstate/agentstate/persistence"

// Writers of several nodes may share the database: lockSessionsSQL, the
// namespace's transaction lock (held to commit), makes their creates in
// one namespace take turns, so two cannot both count the last free slot.
// The count is a statement of its own, after the lock: under READ
// COMMITTED its snapshot is then taken once the other's create committed.
// countSessionsSQL counts on sessions_by_namespace; $2 is the other
// spelling of the same namespace (the default namespace is also the empty
// one), or $1 again.
const (
	lockSessionsSQL  = `SELECT pg_advisory_xact_lock(hashtextextended('agentstate.sessions:' || $1, 0))`
	countSessionsSQL = `SELECT COUNT(*) FROM sessions WHERE namespace IN ($1, $2)`
)

// checkSessionsQuota refuses a create that would give namespace ns more
// sessions than its quota allows; a namespace without a bound costs
// nothing (no statement, no lock).
func (a *applier) checkSessionsQuota(ns string) error {
	q := persistence.QuotaOf(a.quotas, ns)
	if q.MaxSessions <= 0 {
		return nil
	}
	name, alias := persistence.NamespaceSpellings(ns)
	if _, err := a.exec(lockSessionsSQL, name); err != nil {
		return err
	}
	var n int64
	if err := a.queryRow(countSessionsSQL, []any{name, alias}, &n); err != nil {
		return err
	}
	if n >= q.MaxSessions {
		return persistence.SessionsQuotaError(ns, q.MaxSessions)
	}
	return nil
}
