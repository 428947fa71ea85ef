package sqlite

import (
	"strings"
	"testing"

	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// DeleteSessions selects its group as a range of sessions_by_client_key,
// not a walk of the namespace's sessions.
func TestGroupSelectionUsesTheClientKeyIndex(t *testing.T) {
	s := mustOpen(t, "memory:group-plans")
	defer mustClose(t, s)
	w := sqlstore.NewWhere(dialect{})
	query := sqlstore.GroupQuery(w, "team", "thread-1:", 1001)
	plan := queryPlan(t, s, query, w.Args()...)
	t.Logf("plan: %s", plan)
	if !strings.Contains(plan, "USING INDEX sessions_by_client_key (namespace=? AND client_key>? AND client_key<?)") {
		t.Errorf("plan %q, want a range of sessions_by_client_key", plan)
	}
	if strings.Contains(plan, "SCAN sessions") || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("plan %q scans or sorts the sessions", plan)
	}
}
