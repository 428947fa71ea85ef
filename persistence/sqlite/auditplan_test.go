package sqlite

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence/sqlstore"
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
			"list": func() (string, []any) { return sqlstore.ListAuditQuery(dialect{}, c.filter, "", 10) },
			"list after": func() (string, []any) {
				return sqlstore.ListAuditQuery(dialect{}, c.filter, "01J0000000000000000000000E", 10)
			},
			"count": func() (string, []any) { return sqlstore.CountAuditQuery(dialect{}, c.filter) },
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

// opcodes returns the VDBE opcodes of query, as EXPLAIN lists them.
func opcodes(t *testing.T, s *Store, query string) []string {
	t.Helper()
	// The driver wants a value per parameter, though EXPLAIN binds none:
	// as many as the highest ?N, or as there are ? when none is numbered.
	n := strings.Count(query, "?")
	if numbered := regexp.MustCompile(`\?(\d+)`).FindAllStringSubmatch(query, -1); len(numbered) > 0 {
		n = 0
		for _, m := range numbered {
			k, _ := strconv.Atoi(m[1])
			n = max(n, k)
		}
	}
	rows, err := s.rdb.QueryContext(context.Background(), "EXPLAIN "+query, make([]any, n)...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	var ops []string
	for rows.Next() {
		var addr, p1, p2, p3, p5 int
		var op string
		var p4, comment any
		if err := rows.Scan(&addr, &op, &p1, &p2, &p3, &p4, &p5, &comment); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ops
}

// A plan write's statements run once per recorded error, and none of them
// may make SQLite materialize its rows in an ephemeral table first (it
// does for an INSERT whose SELECT reads the table it inserts into: that
// cost more than the rest of the insert, issue 17). The control is the
// record insert as it was, with its sequence check as an EXISTS on
// plan_errors.
func TestPlanWriteStatementsMaterializeNothing(t *testing.T) {
	s := mustOpen(t, "memory:plan-statements")
	defer mustClose(t, s)
	for _, q := range []string{upsertPlanSQL, insertErrorSQL, upsertStepSQL} {
		if ops := opcodes(t, s, q); slices.Contains(ops, "OpenEphemeral") {
			t.Errorf("%s\nopens an ephemeral table: %v", q, ops)
		}
	}
	old := `INSERT INTO plan_errors (record_id, plan_id, sequence, phase, step_id, error_type,
	message, tool, actor_name, stack_summary, attributes_json, category, is_retriable, retry_count,
	max_retries, recovery_action, recovery_hint, recovery_command, recorded_at)
	SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19
	WHERE ?3 = 0 OR EXISTS (SELECT 1 FROM plan_errors WHERE plan_id = ?2 AND sequence = ?3 - 1)`
	if ops := opcodes(t, s, old); !slices.Contains(ops, "OpenEphemeral") {
		t.Fatalf("control: the INSERT … SELECT reading plan_errors opens no ephemeral table: %v", ops)
	}
}
