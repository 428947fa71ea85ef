package postgres

import (
	"context"
	"testing"

	"github.com/agentstate/agentstate/persistence/storetest"
)

// The plan-namespace migration puts the plans of an older build in the
// default namespace (storetest.CheckMigratedPlans).
func TestMigrationPutsOldPlansInTheDefaultNamespace(t *testing.T) {
	dsn, conn := olderSchema(t, migrationWith(t, "ALTER TABLE plans ADD COLUMN namespace"))
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `INSERT INTO plans (plan_id, max_retries, error_details_json) VALUES ($1, 5, '{}')`,
		storetest.OldPlanID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO plan_step_retries (plan_id, phase, step_id, count) VALUES ($1, 3, 's', 2)`,
		storetest.OldPlanID); err != nil {
		t.Fatal(err)
	}
	for i, id := range storetest.OldPlanRecordIDs {
		if _, err := conn.Exec(ctx, `INSERT INTO plan_errors (record_id, plan_id, sequence, phase, step_id, error_type, message,
		tool, actor_name, stack_summary, attributes_json, category, is_retriable, retry_count, max_retries,
		recovery_action, recovery_hint, recovery_command, recorded_at)
		VALUES ($1, $2, $3, 3, 's', 'E', '', '', '', '', '{}', 6, false, 1, 5, 1, '', '', 1)`, id, storetest.OldPlanID, i); err != nil {
			t.Fatal(err)
		}
	}
	s := mustOpen(t, dsn)
	storetest.CheckMigratedPlans(t, s)
}
