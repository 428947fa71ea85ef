package sqlite

import (
	"context"
	"strings"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
)

// queryPlan returns the EXPLAIN QUERY PLAN details of query.
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.rdb.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	var details []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		details = append(details, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(details, "; ")
}

// Every audit filter on an indexed column searches its index — for the
// optional columns a partial index (WHERE x != ”), which the planner uses
// only because the queries repeat that condition — and never scans the
// whole log, for List (with and without a cursor) and Count.
func TestAuditFiltersUseTheirIndex(t *testing.T) {
	s := mustOpen(t, "memory:audit-plans")
	defer mustClose(t, s)
	cases := []struct {
		filter *auditv1.Filter
		index  string
	}{
		{&auditv1.Filter{PlanId: "plan-1"}, "audit_by_plan"},
		{&auditv1.Filter{SessionId: "01J0000000000000000000000S"}, "audit_by_session"},
		{&auditv1.Filter{ActorName: "agent"}, "audit_by_actor"},
		{&auditv1.Filter{EventType: "plan_applied"}, "audit_by_type"},
		{&auditv1.Filter{ActorName: "agent", EventType: "plan_applied"}, "audit_by_"},
	}
	for _, c := range cases {
		for name, q := range map[string]func() (string, []any){
			"list":       func() (string, []any) { return listAuditQuery(c.filter, "", 10) },
			"list after": func() (string, []any) { return listAuditQuery(c.filter, "01J0000000000000000000000E", 10) },
			"count":      func() (string, []any) { return countAuditQuery(c.filter) },
		} {
			query, args := q()
			plan := queryPlan(t, s, query, args...)
			if !strings.Contains(plan, "INDEX "+c.index) || strings.Contains(plan, "SCAN audit_log") {
				t.Errorf("%s %v: plan %q, want a search of %s*", name, c.filter, plan, c.index)
			}
		}
	}
	// The check above can fail: without the repeated condition the
	// partial index is unusable and the planner scans the log.
	plan := queryPlan(t, s, "SELECT COUNT(*) FROM audit_log WHERE actor_name = ?", "agent")
	if !strings.Contains(plan, "SCAN audit_log") {
		t.Fatalf("control query plan %q: want a full scan", plan)
	}
}
