package sqlite

import (
	"database/sql"
	"errors"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
	sqlite3 "github.com/mattn/go-sqlite3"
)

const (
	// The plan write's first statement is also its fencing check: the row
	// is inserted or updated only where the write's epoch (?6) is the
	// plan's in owners (none counts as 0; the plan's row there is keyed
	// by persistence.PlanKey, ?7), so a fenced write changes
	// nothing and reports no change, and the writer runs no separate
	// epoch query for it (applier.dispatch). owners is another table, so
	// SQLite need not materialize the SELECT.
	upsertPlanSQL = `INSERT INTO plans (namespace, plan_id, max_retries, error_details_json)
	SELECT ?8, ?1, COALESCE(?2, ?4), CASE WHEN ?3 = '' THEN '{}' ELSE ?3 END
	WHERE COALESCE((SELECT epoch FROM owners WHERE kind = ?5 AND id = ?7), 0) = ?6
	ON CONFLICT (namespace, plan_id) DO UPDATE SET
		max_retries = COALESCE(?2, max_retries),
		error_details_json = CASE WHEN ?3 = '' THEN error_details_json ELSE ?3 END`
	// A record is inserted only where it continues the plan's sequence:
	// at 0, or after a stored sequence - 1 (the trigger plan_errors_dense
	// refuses it otherwise; see its migration in schema.go); with UNIQUE
	// (namespace, plan_id, sequence) (a taken sequence is an error) that keeps the sequence
	// dense without a separate read of the plan's last sequence. A stored
	// record id fails the insert too (UNIQUE (record_id)). Whichever
	// refused it, nothing is inserted, and notInserted tells which.
	insertErrorSQL = `INSERT INTO plan_errors (record_id, namespace, plan_id, sequence, phase, step_id, error_type,
	message, tool, actor_name, stack_summary, attributes_json, category, is_retriable, retry_count,
	max_retries, recovery_action, recovery_hint, recovery_command, recorded_at)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)`
	upsertStepSQL = `INSERT INTO plan_step_retries (namespace, plan_id, phase, step_id, count) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (namespace, plan_id, phase, step_id) DO UPDATE SET count = excluded.count`
)

// PlanWrite upserts the plan row first (its fencing check, and the parent
// of records and step counters), then appends records, which must
// continue the plan's dense sequence exactly (plan_errors_dense and
// UNIQUE (namespace, plan_id, sequence) check it).
func (a *applier) PlanWrite(c *persistence.PlanWrite) (persistence.Result, error) {
	maxRetries, err := sqlstore.MaxRetries(c)
	if err != nil {
		return persistence.Result{}, err
	}
	ns := persistence.PlanNamespace(c.Namespace)
	res, err := a.exec(upsertPlanSQL, c.PlanID, maxRetries, c.ErrorDetailsJSON, persistence.DefaultMaxRetries,
		int64(persistence.OwnerPlan), c.Epoch, persistence.PlanKey(ns, c.PlanID), ns)
	if err != nil {
		return persistence.Result{}, err
	}
	if n, err := rowsAffected(res); err != nil {
		return persistence.Result{}, err
	} else if n == 0 {
		// Fenced: checkEpoch says by which epoch.
		if err := a.checkEpoch(c); err != nil {
			return persistence.Result{}, err
		}
		return persistence.Result{}, errs.Internal("plan %s: the plan row was not written, though its epoch is current", c.PlanID)
	}
	// The other statements run as queries on the driver connection
	// (applier.insert: arguments bound and the statement run in one cgo
	// crossing, where Exec crosses once per text argument).
	for i, r := range c.Records {
		recorded, err := sqlstore.CheckRecord(ns, c.PlanID, c.Records, i)
		if err != nil {
			return persistence.Result{}, err
		}
		err = a.statement(insertErrorSQL, r.RecordId, ns, c.PlanID, r.Sequence, int64(r.Phase), r.StepId, r.ErrorType,
			r.Message, r.Tool, r.ActorName, r.StackSummary, sqlstore.OrEmptyObject(r.AttributesJson), int64(r.Category),
			boolInt(r.IsRetriable), int64(r.RetryCount), int64(r.MaxRetries), int64(r.RecoveryAction),
			r.RecoveryHint, r.RecoveryCommand, recorded)
		if err != nil {
			switch constraint(err) {
			case sqlite3.ErrConstraintUnique, sqlite3.ErrConstraintTrigger:
				// A stored record id, a taken sequence, or a gap
				// (plan_errors_dense).
				return persistence.Result{}, a.notInserted(ns, c.PlanID, c.Records, i)
			}
			return persistence.Result{}, err
		}
	}
	for _, sr := range c.StepRetries {
		if err := a.statement(upsertStepSQL, ns, c.PlanID, int64(sr.Phase), sr.StepID, int64(sr.Count)); err != nil {
			return persistence.Result{}, err
		}
	}
	if err := a.Audit(c.Audit); err != nil {
		return persistence.Result{}, err
	}
	return persistence.Result{}, nil
}

// statement runs one statement of driver values (int64, string, nil)
// through insert, in the applier's reused argument slice.
func (a *applier) statement(query string, args ...any) error {
	buf := append(a.args[:0], args...)
	err := a.insert(query, buf)
	clear(buf)
	a.args = buf[:0]
	return err
}

// notInserted explains why records[i] was not inserted: its record id is
// stored already (recordsExist), or its sequence does not continue the
// plan's.
func (a *applier) notInserted(ns, planID string, records []*planv1.ErrorRecord, i int) error {
	r := records[i]
	if _, err := a.storedRecord(r.RecordId); err == nil {
		return a.recordsExist(planID, records, i)
	} else if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	var next int64
	if err := a.queryRow(`SELECT COALESCE(MAX(sequence) + 1, 0) FROM plan_errors WHERE namespace = ? AND plan_id = ?`, ns, planID).Scan(&next); err != nil {
		return err
	}
	if r.Sequence < next {
		return errs.FailedPrecondition("plan %s: sequence %d is taken; the next sequence is %d", planID, r.Sequence, next)
	}
	return errs.FailedPrecondition("plan %s: error record %s has sequence %d, but the next sequence is %d",
		planID, r.RecordId, r.Sequence, next)
}

// recordsExist explains why records[i] was not inserted: its record id is
// stored already. The error lists the stored record of records[i] and of
// every later record whose id is stored too, so that one failed write
// resolves all of them; an id that this command itself inserted (twice in
// one command) is INVALID_ARGUMENT instead. The command rolls back either
// way.
func (a *applier) recordsExist(planID string, records []*planv1.ErrorRecord, i int) error {
	mine := make(map[string]bool, i)
	for _, r := range records[:i] {
		mine[r.RecordId] = true
	}
	e := &persistence.RecordsExistError{PlanID: planID}
	for _, r := range records[i:] {
		if mine[r.RecordId] {
			return errs.InvalidArgument("plan %s: error record id %s appears twice in one write", planID, r.RecordId)
		}
		mine[r.RecordId] = true
		stored, err := a.storedRecord(r.RecordId)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return err
		}
		e.Stored = append(e.Stored, stored)
	}
	return e
}

// storedRecord returns the stored record recordID, sql.ErrNoRows when
// there is none.
func (a *applier) storedRecord(recordID string) (*planv1.ErrorRecord, error) {
	stored, err := sqlstore.StoredRecords(a.ctx, txDB{a: a}, []string{recordID})
	if err == nil && len(stored) == 0 {
		err = sql.ErrNoRows
	}
	if err != nil {
		return nil, err
	}
	return stored[0], nil
}
