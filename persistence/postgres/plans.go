package postgres

import (
	"github.com/agentstate/agentstate/messages/errs"
	planv1 "github.com/agentstate/agentstate/messages/plan/v1"
	"github.com/agentstate/agentstate/persistence"
)

const (
	// The upsert also locks the plan row until commit, so that two writers
	// appending records to one plan take turns, and the second reads the
	// first's records when it computes the next sequence.
	upsertPlanSQL = `INSERT INTO plans (plan_id, max_retries, error_details_json)
	VALUES ($1, COALESCE($2::bigint, $4::bigint), CASE WHEN $3::text = '' THEN '{}' ELSE $3::text END)
	ON CONFLICT (plan_id) DO UPDATE SET
		max_retries = COALESCE($2::bigint, plans.max_retries),
		error_details_json = CASE WHEN $3::text = '' THEN plans.error_details_json ELSE $3::text END`
	insertErrorsSQL = `INSERT INTO plan_errors (plan_id, record_id, sequence, phase, step_id, error_type,
	message, tool, actor_name, stack_summary, attributes_json, category, is_retriable, retry_count,
	max_retries, recovery_action, recovery_hint, recovery_command, recorded_at)
	SELECT $1, * FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::text[], $10::text[], $11::text[], $12::bigint[], $13::boolean[], $14::bigint[],
		$15::bigint[], $16::bigint[], $17::text[], $18::text[], $19::bigint[])
	ON CONFLICT (record_id) DO NOTHING
	RETURNING record_id`
	// A stored record id is skipped rather than an error (which would abort
	// the transaction until the savepoint's rollback), so that the command
	// can look up which record it is (recordsExist).
	storedErrorsSQL = `SELECT record_id, plan_id, sequence, phase, step_id, error_type, message, tool,
	actor_name, stack_summary, attributes_json, category, is_retriable, retry_count, max_retries,
	recovery_action, recovery_hint, recovery_command, recorded_at FROM plan_errors WHERE record_id = ANY($1::text[])`
	upsertStepSQL = `INSERT INTO plan_step_retries (plan_id, phase, step_id, count) VALUES ($1, $2, $3, $4)
	ON CONFLICT (plan_id, phase, step_id) DO UPDATE SET count = excluded.count`
)

// planWrite upserts the plan row first (so records and step counters have
// their parent), then appends records, which must continue the plan's
// dense sequence exactly.
func (a *applier) planWrite(c *persistence.PlanWrite) (persistence.Result, error) {
	if c.PlanID == "" {
		return persistence.Result{}, errs.InvalidArgument("plan write: no plan id")
	}
	var maxRetries *int64
	if c.MaxRetries != nil {
		if *c.MaxRetries < 0 {
			return persistence.Result{}, errs.InvalidArgument("plan %s: max_retries %d is negative", c.PlanID, *c.MaxRetries)
		}
		n := int64(*c.MaxRetries)
		maxRetries = &n
	}
	for _, r := range c.Records {
		switch {
		case r == nil:
			return persistence.Result{}, errs.InvalidArgument("plan %s: nil error record", c.PlanID)
		case r.GetRecordId() == "":
			return persistence.Result{}, errs.InvalidArgument("plan %s: error record has no record_id", c.PlanID)
		case r.GetPlanId() != "" && r.GetPlanId() != c.PlanID:
			return persistence.Result{}, errs.InvalidArgument("plan %s: error record %s belongs to plan %s", c.PlanID, r.RecordId, r.PlanId)
		}
	}
	if err := a.fence(persistence.OwnerPlan, c.PlanID, c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(upsertPlanSQL, c.PlanID, maxRetries, c.ErrorDetailsJSON, int64(persistence.DefaultMaxRetries)); err != nil {
		return persistence.Result{}, err
	}
	if len(c.Records) > 0 {
		if err := a.insertRecords(c.PlanID, c.Records); err != nil {
			return persistence.Result{}, err
		}
	}
	for _, sr := range c.StepRetries {
		if _, err := a.exec(upsertStepSQL, c.PlanID, int64(sr.Phase), sr.StepID, int64(sr.Count)); err != nil {
			return persistence.Result{}, err
		}
	}
	if err := a.audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.Result{}, nil
}

// insertRecords checks that records continue the plan's sequence, then
// inserts them in one statement. Called with the plan row locked.
func (a *applier) insertRecords(planID string, records []*planv1.ErrorRecord) error {
	var next int64
	if err := a.queryRow(`SELECT COALESCE(MAX(sequence) + 1, 0) FROM plan_errors WHERE plan_id = $1`,
		[]any{planID}, &next); err != nil {
		return err
	}
	n := len(records)
	var (
		ids, steps, types, msgs, tools, actors, stacks, attrs, hints, cmds = make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n)
		seqs, phases, cats, retries, maxes, actions, recorded = make([]int64, n), make([]int64, n), make([]int64, n),
			make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		retriable = make([]bool, n)
	)
	for i, r := range records {
		if r.Sequence != next+int64(i) {
			return errs.FailedPrecondition("plan %s: error record %s has sequence %d, but the next sequence is %d",
				planID, r.RecordId, r.Sequence, next+int64(i))
		}
		ids[i], seqs[i], phases[i], steps[i], types[i] = r.RecordId, r.Sequence, int64(r.Phase), r.StepId, r.ErrorType
		msgs[i], tools[i], actors[i], stacks[i] = r.Message, r.Tool, r.ActorName, r.StackSummary
		attrs[i], cats[i], retriable[i], retries[i] = orEmptyObject(r.AttributesJson), int64(r.Category), r.IsRetriable, int64(r.RetryCount)
		maxes[i], actions[i], hints[i], cmds[i] = int64(r.MaxRetries), int64(r.RecoveryAction), r.RecoveryHint, r.RecoveryCommand
		recorded[i] = persistence.UnixNanos(r.RecordedAt)
	}
	inserted := make(map[string]bool, n)
	var id string
	err := a.forEachRow(insertErrorsSQL, []any{planID, ids, seqs, phases, steps, types, msgs, tools, actors, stacks, attrs,
		cats, retriable, retries, maxes, actions, hints, cmds, recorded}, []any{&id}, func() error {
		inserted[id] = true
		return nil
	})
	switch uniqueViolation(err) {
	case "":
		if err != nil {
			return err
		}
	case "plan_errors_sequence_key":
		return errs.FailedPrecondition("plan %s: a sequence from %d is taken", planID, next)
	default:
		return err
	}
	if len(inserted) == n {
		return nil
	}
	return a.recordsExist(planID, ids, inserted)
}

// recordsExist explains why some of ids were not inserted: they are stored
// already. The error lists each one's stored record, so that one failed
// write resolves all of them; an id twice in the command (inserted once,
// skipped once) is INVALID_ARGUMENT instead. The command rolls back either
// way.
func (a *applier) recordsExist(planID string, ids []string, inserted map[string]bool) error {
	seen := make(map[string]bool, len(ids))
	var missing []string
	for _, id := range ids {
		if seen[id] {
			return errs.InvalidArgument("plan %s: error record id %s appears twice in one write", planID, id)
		}
		seen[id] = true
		if !inserted[id] {
			missing = append(missing, id)
		}
	}
	e := &persistence.RecordsExistError{PlanID: planID}
	var r planv1.ErrorRecord
	var phase, category, retries, maxes, action, recordedAt int64
	err := a.forEachRow(storedErrorsSQL, []any{missing}, []any{&r.RecordId, &r.PlanId, &r.Sequence, &phase, &r.StepId,
		&r.ErrorType, &r.Message, &r.Tool, &r.ActorName, &r.StackSummary, &r.AttributesJson, &category,
		&r.IsRetriable, &retries, &maxes, &action, &r.RecoveryHint, &r.RecoveryCommand, &recordedAt}, func() error {
		e.Stored = append(e.Stored, &planv1.ErrorRecord{RecordId: r.RecordId, PlanId: r.PlanId, Sequence: r.Sequence,
			Phase: planv1.Phase(phase), StepId: r.StepId, ErrorType: r.ErrorType, Message: r.Message, Tool: r.Tool,
			ActorName: r.ActorName, StackSummary: r.StackSummary, AttributesJson: r.AttributesJson,
			Category: planv1.ErrorCategory(category), IsRetriable: r.IsRetriable, RetryCount: int32(retries),
			MaxRetries: int32(maxes), RecoveryAction: planv1.RecoveryAction(action), RecoveryHint: r.RecoveryHint,
			RecoveryCommand: r.RecoveryCommand, RecordedAt: persistence.Stamp(recordedAt)})
		return nil
	})
	if err != nil {
		return err
	}
	if len(e.Stored) != len(missing) {
		return errs.Internal("plan %s: %d error record(s) were neither inserted nor found stored", planID, len(missing)-len(e.Stored))
	}
	return e
}
