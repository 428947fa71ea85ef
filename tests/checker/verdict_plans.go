package checker

import (
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
)

// checkPlans: per plan, records dense 0..n-1 in read order, record ids
// unique, every record either of a record id a request named or within the
// attempts of requests that named none; every acknowledged record present
// as acknowledged, under the record id its request named.
func checkPlans(l *Ledger, o *Observed, r *Report) {
	stored := make(map[string]*planv1.ErrorRecord)
	for _, plan := range sortedKeys(l.planAttempts) {
		recs := o.Plans[plan]
		r.PlanRecords += len(recs)
		for i, rec := range recs {
			if rec.GetSequence() != int64(i) {
				r.problem(&r.Gaps, "plan %s: record %d read with sequence %d", plan, i, rec.GetSequence())
			}
			if _, dup := stored[rec.GetRecordId()]; dup {
				r.problem(&r.DupPlanRecords, "plan %s: record id %s stored twice", plan, rec.GetRecordId())
			}
			stored[rec.GetRecordId()] = rec
		}
		unnamed := 0
		for _, rec := range recs {
			if !l.planNamed[plan][rec.GetRecordId()] {
				unnamed++
			}
		}
		if attempts := l.planUnnamed[plan]; unnamed > attempts {
			r.problemN(&r.Phantom, unnamed-attempts, "plan %s: %d records of ids no request named, only %d RecordError attempts without a record_id made",
				plan, unnamed, attempts)
		}
	}
	ackedIDs := make(map[string]bool)
	for _, a := range l.plans {
		r.PlanErrorsAcked++
		rec := a.Record
		id := rec.GetRecordId()
		if ackedIDs[id] {
			r.problem(&r.BadAcks, "plan %s: record id %s acknowledged for two attempts", a.Req.GetPlanId(), id)
		}
		ackedIDs[id] = true
		if named := a.Req.GetRecordId(); named != "" && id != named {
			r.problem(&r.BadAcks, "plan %s: request for record %s acknowledged with record %s", a.Req.GetPlanId(), named, id)
			continue
		}
		if rec.GetPlanId() != a.Req.GetPlanId() || rec.GetNamespace() != a.Req.GetNamespace() || rec.GetMessage() != a.Req.GetMessage() {
			r.problem(&r.BadAcks, "plan %s: acknowledged record %s belongs to plan %q of namespace %q with message %q",
				a.Req.GetPlanId(), id, rec.GetPlanId(), rec.GetNamespace(), rec.GetMessage())
			continue
		}
		s := stored[id]
		switch {
		case s == nil:
			r.problem(&r.Lost, "plan %s: acknowledged record %s (sequence %d) not found", rec.GetPlanId(), id, rec.GetSequence())
		case s.GetPlanId() != rec.GetPlanId() || s.GetNamespace() != rec.GetNamespace() || s.GetSequence() != rec.GetSequence() || s.GetMessage() != rec.GetMessage() ||
			s.GetStepId() != rec.GetStepId() || s.GetPhase() != rec.GetPhase():
			r.problem(&r.Changed, "plan %s: record %s acknowledged as sequence %d, stored as %d in plan %s", rec.GetPlanId(), id, rec.GetSequence(), s.GetSequence(), s.GetPlanId())
		}
	}
}
