package server

import (
	"fmt"
	"sort"
	"strings"

	"github.com/agentstate/agentstate/persistence"
)

// quotaSpec is one entry of the --auth-file's "quotas" section: the
// quotas of the namespaces a name or pattern matches (as a grant's: a
// name, a prefix ending in "*", or "*"). Zero or absent fields are the
// defaults (no bound on sessions or stored bytes;
// persistence.MaxStateKeys keys per shared scope).
type quotaSpec struct {
	Namespace    string `json:"namespace"`
	MaxSessions  int64  `json:"max_sessions"`
	MaxScopeKeys int    `json:"max_scope_keys"`
	MaxBytes     int64  `json:"max_bytes"`
}

// namespaceQuotas are the --auth-file's quotas. A namespace takes the
// quota of the most specific entry matching it: its own name, else the
// longest matching prefix pattern, else "*". Immutable once built: a
// reload swaps it whole (persistence.Store.SetQuotas).
type namespaceQuotas struct {
	exact map[string]persistence.Quota
	// prefixes, longest first; "*" is the empty prefix, last.
	prefixes []prefixQuota
}

type prefixQuota struct {
	prefix string
	quota  persistence.Quota
}

func (q *namespaceQuotas) Quota(ns string) persistence.Quota {
	if v, ok := q.exact[ns]; ok {
		return v
	}
	for _, p := range q.prefixes {
		if strings.HasPrefix(ns, p.prefix) {
			return p.quota
		}
	}
	return persistence.Quota{}
}

// parseQuotas checks the "quotas" section; nil when it is empty. Any
// mistake is an error naming the entry.
func parseQuotas(specs []quotaSpec) (*namespaceQuotas, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	q := &namespaceQuotas{exact: map[string]persistence.Quota{}}
	seen := map[string]bool{}
	for i, s := range specs {
		if s.Namespace == "" {
			return nil, fmt.Errorf("quotas[%d] has no namespace (a name, a prefix ending in \"*\", or \"*\")", i)
		}
		if seen[s.Namespace] {
			return nil, fmt.Errorf("quotas: namespace %q appears twice", s.Namespace)
		}
		seen[s.Namespace] = true
		if s.MaxSessions < 0 || s.MaxScopeKeys < 0 || s.MaxBytes < 0 {
			return nil, fmt.Errorf("quotas: namespace %q: max_sessions, max_scope_keys and max_bytes must not be negative", s.Namespace)
		}
		if s.MaxScopeKeys > persistence.MaxStateKeys {
			return nil, fmt.Errorf("quotas: namespace %q: max_scope_keys %d is more than a state holds (%d)",
				s.Namespace, s.MaxScopeKeys, persistence.MaxStateKeys)
		}
		v := persistence.Quota{MaxSessions: s.MaxSessions, MaxScopeKeys: s.MaxScopeKeys, MaxBytes: s.MaxBytes}
		if p, ok := strings.CutSuffix(s.Namespace, "*"); ok {
			q.prefixes = append(q.prefixes, prefixQuota{p, v})
		} else {
			q.exact[s.Namespace] = v
		}
	}
	sort.SliceStable(q.prefixes, func(i, j int) bool { return len(q.prefixes[i].prefix) > len(q.prefixes[j].prefix) })
	return q, nil
}

// storeQuotas are the quotas ids bring for the store: none (the
// defaults) when ids is nil or has no "quotas" section. An untyped nil,
// never a nil *namespaceQuotas in the interface.
func (ids *identities) storeQuotas() persistence.Quotas {
	if ids == nil || ids.quotas == nil {
		return nil
	}
	return ids.quotas
}
