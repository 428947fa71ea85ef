package sqlstore

import (
	"sort"

	"github.com/agentstate/agentstate/persistence"
)

// GroupQuery is DeleteSessions' selection of a namespace's sessions by
// client-key prefix, on the sessions table: a range [prefix, PrefixEnd)
// of the (namespace, client_key) index, so its cost follows the matching
// keys, not the namespace. Keys are valid UTF-8 (checked when written),
// whose byte order is code point order, so the range holds exactly the
// keys starting with prefix; the store's own prefix test stays as a
// residual filter. The query has no ORDER BY, which would tempt a
// planner to walk the namespace in session_id order: SortGroup orders
// the (at most limit) rows afterwards.
func GroupQuery(w *Where, namespace, prefix string, limit int) string {
	w.Cond("namespace = " + w.Arg(namespace))
	w.Cond("client_key >= " + w.Arg(prefix) + " AND client_key <> ''")
	if end, ok := persistence.PrefixEnd(prefix); ok {
		w.Cond("client_key < " + w.Arg(end))
	}
	w.Cond("state <> " + w.Arg(int64(persistence.SessionStateStaged)))
	return "SELECT session_id, actor_name, next_sequence, client_key FROM sessions" + w.Clause() + " LIMIT " + w.Arg(limit)
}

// SortGroup puts a group in session_id order (byte order), as
// GroupDialect.GroupMembers answers it.
func SortGroup(ms []persistence.GroupMember) {
	sort.Slice(ms, func(i, j int) bool { return ms[i].SessionID < ms[j].SessionID })
}
