package sqlite

import "github.com/agentstate/agentstate/persistence"

// countSessionsSQL counts a namespace's sessions on sessions_by_namespace;
// ?2 is the other spelling of the same namespace (the default namespace is
// also the empty one), or ?1 again.
const countSessionsSQL = `SELECT COUNT(*) FROM sessions WHERE namespace IN (?1, ?2)`

// checkSessionsQuota refuses a create that would give namespace ns more
// sessions than its quota allows. It runs in the writer's transaction,
// where every create is serialized, so the count cannot change before the
// insert; a namespace without a bound costs nothing. A create refused
// later (its id taken) was counted as one more, which only refuses a
// create that would have failed anyway.
func (a *applier) checkSessionsQuota(ns string) error {
	q := persistence.QuotaOf(a.quotas, ns)
	if q.MaxSessions <= 0 {
		return nil
	}
	name, alias := persistence.NamespaceSpellings(ns)
	var n int64
	if err := a.queryRow(countSessionsSQL, name, alias).Scan(&n); err != nil {
		return err
	}
	if n >= q.MaxSessions {
		return persistence.SessionsQuotaError(ns, q.MaxSessions)
	}
	return nil
}
