package sqlstore

import (
	"context"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// MaxRetries checks a PlanWrite's retry policy and returns the value its
// upsert binds: nil to leave the stored one alone, else an int64.
func MaxRetries(c *persistence.PlanWrite) (any, error) {
	if c.PlanID == "" {
		return nil, errs.InvalidArgument("plan write: no plan id")
	}
	if c.MaxRetries == nil {
		return nil, nil
	}
	if *c.MaxRetries < 0 {
		return nil, errs.InvalidArgument("plan %s: max_retries %d is negative", c.PlanID, *c.MaxRetries)
	}
	return int64(*c.MaxRetries), nil
}

// CheckRecord checks the i-th error record of a PlanWrite of plan planID
// of namespace ns and returns its recorded_at as stored: it has an id,
// belongs to the plan and its namespace (or names none), continues the sequence of the record before it, and
// has a storable time. Every error is the command's own.
func CheckRecord(ns, planID string, records []*planv1.ErrorRecord, i int) (int64, error) {
	r := records[i]
	switch {
	case r == nil:
		return 0, errs.InvalidArgument("plan %s: nil error record", planID)
	case r.GetRecordId() == "":
		return 0, errs.InvalidArgument("plan %s: error record has no record_id", planID)
	case r.GetPlanId() != "" && r.GetPlanId() != planID:
		return 0, errs.InvalidArgument("plan %s: error record %s belongs to plan %s", planID, r.RecordId, r.PlanId)
	case r.GetNamespace() != "" && r.GetNamespace() != persistence.PlanNamespace(ns):
		return 0, errs.InvalidArgument("plan %s: error record %s belongs to namespace %q", planID, r.RecordId, r.Namespace)
	case i > 0 && r.GetSequence() != records[i-1].GetSequence()+1:
		return 0, errs.FailedPrecondition("plan %s: error record %s has sequence %d after %d",
			planID, r.RecordId, r.Sequence, records[i-1].GetSequence())
	}
	recorded, err := persistence.StoredNanos("recorded_at", r.RecordedAt)
	if err != nil {
		return 0, persistence.Of("error record", r.RecordId, err)
	}
	return recorded, nil
}

// StoredRecords returns the stored records among ids, in no particular
// order.
func StoredRecords(ctx context.Context, db DB, ids []string) ([]*planv1.ErrorRecord, error) {
	var out []*planv1.ErrorRecord
	row := newRecordRow()
	err := lookup(ctx, db, "SELECT "+RecordColumns+" FROM plan_errors", "record_id", ids, row.dest, func() error {
		out = append(out, row.record())
		return nil
	})
	return out, err
}
