package persistence

import (
	"net/url"
	"strings"

	"github.com/agentstate/agentstate/messages/errs"
)

// DefaultScopeNamespace is the namespace of a shared scope whose name
// names none: the node's default namespace (node/server's rules map
// scopes the same way).
const DefaultScopeNamespace = "local"

// ScopeNamespace is the namespace a shared scope belongs to, read from its
// name as the ADK backend writes them: "<kind>:<namespace>" or
// "<kind>:<namespace>/<rest>", the namespace path-escaped ("app:myapp",
// "user:myapp/alice"). Only writers of that namespace may write the scope
// (the node's authorization), so every key of a scope is that
// namespace's, and a scope filled up is its namespace's quota error.
func ScopeNamespace(name string) string {
	_, rest, ok := strings.Cut(name, ":")
	if !ok {
		return DefaultScopeNamespace
	}
	ns, _, _ := strings.Cut(rest, "/")
	if u, err := url.PathUnescape(ns); err == nil {
		ns = u
	}
	if ns == "" {
		return DefaultScopeNamespace
	}
	return ns
}

// Apply returns the scope's state after d (from state, "" when never
// written). A scope that would hold more keys than its namespace's quota
// of keys per shared scope allows (q's; MaxStateKeys by default) is that
// quota's error, FAILED_PRECONDITION (a
// stored quota: retrying does not help until keys of the scope are
// deleted, unlike the RESOURCE_EXHAUSTED of a full backlog), naming the
// namespace and the scope; the turn fails and stores nothing. Other
// defects are ApplyDelta's.
func (d ScopeDelta) Apply(state string, q Quotas) (string, error) {
	ns := ScopeNamespace(d.Scope)
	max := QuotaOf(q, ns).scopeKeys()
	return applyDelta("scope "+d.Scope, state, d.Delta, max, func(n int) error {
		return errs.FailedPrecondition("namespace %q: its quota of %d keys per shared scope is reached: scope %q would hold %d keys; "+
			"delete keys of the scope first", ns, max, d.Scope, n)
	})
}
