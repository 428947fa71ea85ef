package postgres

import (
	"slices"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
)

const (
	// The upsert also locks the plan row until commit, so that two writers
	// appending records to one plan take turns, and the second's insert
	// sees the first's records when it checks the sequence.
	upsertPlanSQL = `INSERT INTO plans (namespace, plan_id, max_retries, error_details_json)
	VALUES ($5, $1, COALESCE($2::bigint, $4::bigint), CASE WHEN $3::text = '' THEN '{}' ELSE $3::text END)
	ON CONFLICT (namespace, plan_id) DO UPDATE SET
		max_retries = COALESCE($2::bigint, plans.max_retries),
		error_details_json = CASE WHEN $3::text = '' THEN plans.error_details_json ELSE $3::text END`
	// A write's records are inserted only where they continue the plan's
	// sequence: the first ($20) at 0 or after a stored $20 - 1, the rest
	// consecutive (checked before); with the key (namespace, plan_id,
	// sequence)
	// refusing a taken one, that keeps the sequence dense without a
	// separate read of the plan's last sequence. The check covers the
	// whole statement: it inserts all of the records or none. A stored
	// record id is skipped rather than an error (which would abort the
	// transaction until the savepoint's rollback), so that the command can
	// look up which record it is (notInserted).
	insertErrorsSQL = `INSERT INTO plan_errors (namespace, plan_id, record_id, sequence, phase, step_id, error_type,
	message, tool, actor_name, stack_summary, attributes_json, category, is_retriable, retry_count,
	max_retries, recovery_action, recovery_hint, recovery_command, recorded_at)
	SELECT $21, $1, * FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::text[], $10::text[], $11::text[], $12::bigint[], $13::boolean[], $14::bigint[],
		$15::bigint[], $16::bigint[], $17::text[], $18::text[], $19::bigint[])
	WHERE $20::bigint = 0 OR EXISTS (SELECT 1 FROM plan_errors p WHERE p.namespace = $21 AND p.plan_id = $1 AND p.sequence = $20::bigint - 1)
	ON CONFLICT (record_id) DO NOTHING
	RETURNING record_id`
	upsertStepSQL = `INSERT INTO plan_step_retries (namespace, plan_id, phase, step_id, count) VALUES ($5, $1, $2, $3, $4)
	ON CONFLICT (namespace, plan_id, phase, step_id) DO UPDATE SET count = excluded.count`
)

// planWrite upserts the plan row first (so records and step counters have
// their parent), then appends records, which must continue the plan's
// dense sequence exactly (insertErrorsSQL checks it).
func (a *applier) planWrite(c *persistence.PlanWrite) (persistence.Result, error) {
	maxRetries, err := checkPlanWrite(c)
	if err != nil {
		return persistence.Result{}, err
	}
	ns := persistence.PlanNamespace(c.Namespace)
	if err := a.fence(persistence.OwnerPlan, persistence.PlanKey(ns, c.PlanID), c.Epoch); err != nil {
		return persistence.Result{}, err
	}
	if _, err := a.exec(upsertPlanSQL, c.PlanID, maxRetries, c.ErrorDetailsJSON, int64(persistence.DefaultMaxRetries), ns); err != nil {
		return persistence.Result{}, err
	}
	if len(c.Records) > 0 {
		if err := a.insertRecords(ns, c.PlanID, c.Records); err != nil {
			return persistence.Result{}, err
		}
	}
	for _, sr := range c.StepRetries {
		if _, err := a.exec(upsertStepSQL, c.PlanID, int64(sr.Phase), sr.StepID, int64(sr.Count), ns); err != nil {
			return persistence.Result{}, err
		}
	}
	if err := a.Audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.Result{}, nil
}

// insertRecords inserts records, consecutive already, in one statement
// that checks they continue the plan's sequence. Called with the plan's
// owner row locked.
func (a *applier) insertRecords(ns, planID string, records []*planv1.ErrorRecord) error {
	n := len(records)
	args := recordArgs(ns, planID, records)
	ids, seqs := args[1].([]string), args[2].([]int64)
	inserted := make(map[string]bool, n)
	var id string
	err := a.forEachRow(insertErrorsSQL, args, []any{&id}, func() error {
		inserted[id] = true
		return nil
	})
	switch uniqueViolation(err) {
	case "":
		if err != nil {
			return err
		}
	case "plan_errors_sequence_key":
		return errs.FailedPrecondition("plan %s: sequence %d is taken", planID, seqs[0])
	default:
		return err
	}
	if len(inserted) == n {
		return nil
	}
	return a.notInserted(ns, planID, records, ids, inserted)
}

// notInserted explains why some of records (with ids) were not inserted,
// as the SQLite store does. If some were, the check of the sequence held
// and the others are stored already. If none were, and the first is
// stored, so may others be; if the first is not stored, it does not
// continue the plan's sequence (stored or not, it would have gone in
// otherwise), and only then is the plan's last sequence read, to word the
// error.
//
// Stored records fail the command with a *RecordsExistError listing each
// one's stored record, so that one failed write resolves all of them; an
// id twice in the command (inserted once, skipped once) is
// INVALID_ARGUMENT instead. The command rolls back either way.
func (a *applier) notInserted(ns, planID string, records []*planv1.ErrorRecord, ids []string, inserted map[string]bool) error {
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
	stored, err := sqlstore.StoredRecords(a.ctx, txDB{a: a}, missing)
	if err != nil {
		return err
	}
	firstStored := slices.ContainsFunc(stored, func(r *planv1.ErrorRecord) bool { return r.RecordId == ids[0] })
	switch {
	case len(inserted) > 0 && len(stored) != len(missing):
		return errs.Internal("plan %s: %d error record(s) were neither inserted nor found stored", planID, len(missing)-len(stored))
	case len(inserted) > 0 || firstStored:
		return &persistence.RecordsExistError{PlanID: planID, Stored: stored}
	}
	var next int64
	if err := a.queryRow(`SELECT COALESCE(MAX(sequence) + 1, 0) FROM plan_errors WHERE namespace = $1 AND plan_id = $2`,
		[]any{ns, planID}, &next); err != nil {
		return err
	}
	return errs.FailedPrecondition("plan %s: error record %s has sequence %d, but the next sequence is %d",
		planID, records[0].RecordId, records[0].Sequence, next)
}

// recordArgs are insertErrorsSQL's arguments for records of the plan
// (ns, planID): its columns as arrays ([1] the ids, [2] the sequences),
// then the first sequence and the namespace.
func recordArgs(ns, planID string, records []*planv1.ErrorRecord) []any {
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
		ids[i], seqs[i], phases[i], steps[i], types[i] = r.RecordId, r.Sequence, int64(r.Phase), r.StepId, r.ErrorType
		msgs[i], tools[i], actors[i], stacks[i] = r.Message, r.Tool, r.ActorName, r.StackSummary
		attrs[i], cats[i], retriable[i], retries[i] = sqlstore.OrEmptyObject(r.AttributesJson), int64(r.Category), r.IsRetriable, int64(r.RetryCount)
		maxes[i], actions[i], hints[i], cmds[i] = int64(r.MaxRetries), int64(r.RecoveryAction), r.RecoveryHint, r.RecoveryCommand
		// Cannot fail: planWrite refused every record whose time is not storable.
		recorded[i] = persistence.CheckedNanos(r.RecordedAt) // checked above
	}
	return []any{planID, ids, seqs, phases, steps, types, msgs, tools, actors, stacks, attrs,
		cats, retriable, retries, maxes, actions, hints, cmds, recorded, seqs[0], ns}
}

// checkPlanWrite is a plan write's own validation, before any statement:
// its retry policy (returned as the upsert's argument) and its records.
func checkPlanWrite(c *persistence.PlanWrite) (maxRetries any, err error) {
	if maxRetries, err = sqlstore.MaxRetries(c); err != nil {
		return nil, err
	}
	ns := persistence.PlanNamespace(c.Namespace)
	for i := range c.Records {
		if _, err := sqlstore.CheckRecord(ns, c.PlanID, c.Records, i); err != nil {
			return nil, err
		}
	}
	return maxRetries, nil
}
