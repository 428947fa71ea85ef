package persistence

// Each command's own outcome is its own type, read back through the
// command that produced it (its ResultOf), so a consumer never asks a
// Result for fields its command leaves empty, and never type-switches:
// the command knows its result type. An Activate wrapping a command
// carries the wrapped command's outcome, read through the same accessor
// on the wrapped command. Stores set an outcome with the typed setters
// below (SetAppend, SetDelete, SetRemoved, SetRecorded).

// AppendResult is the outcome of an AppendMessages.
type AppendResult struct {
	// One per turn, in order.
	Turns []TurnResult
	// The next sequence after the command.
	NextSequence int64
	// The session's state after the command; "" when no stored turn
	// changed it.
	State string
}

// DeleteResult is the outcome of a DeleteSession.
type DeleteResult struct {
	MessagesRemoved int64
	PlansOrphaned   []string
}

// RemovedResult is the outcome of a PruneAudit, a TruncateSession or a
// PutSnapshot: how many rows (entries, messages, snapshots) went.
type RemovedResult struct {
	Removed int64
}

// RecordedResult is the outcome of a RecordClientAudit: one per entry,
// in order.
type RecordedResult struct {
	Recorded []RecordedAudit
}

// SetAppend sets r's AppendMessages outcome.
func (r *Result) SetAppend(a AppendResult) {
	r.Turns, r.NextSequence, r.State = a.Turns, a.NextSequence, a.State
}

// outcome holds the outcomes of the commands other than AppendMessages;
// each command reads only its own part. removed is a DeleteSession's
// MessagesRemoved or the others' Removed.
type outcome struct {
	removed       int64
	plansOrphaned []string
	recorded      []RecordedAudit
	suffix        *SuffixResult
	group         *GroupResult
	scopes        *ScopesResult
}

// SetDelete sets r's DeleteSession outcome.
func (r *Result) SetDelete(d DeleteResult) {
	r.own.removed, r.own.plansOrphaned = d.MessagesRemoved, d.PlansOrphaned
}

// SetRemoved sets r's PruneAudit, TruncateSession or PutSnapshot outcome.
func (r *Result) SetRemoved(n int64) { r.own.removed = n }

// SetRecorded sets r's RecordClientAudit outcome.
func (r *Result) SetRecorded(rec []RecordedAudit) { r.own.recorded = rec }

// ResultOf returns the outcome r carries of c (or of an Activate that
// wrapped c).
func (c *AppendMessages) ResultOf(r Result) AppendResult {
	return AppendResult{Turns: r.Turns, NextSequence: r.NextSequence, State: r.State}
}

// ResultOf returns the outcome r carries of c.
func (c *DeleteSession) ResultOf(r Result) DeleteResult {
	return DeleteResult{MessagesRemoved: r.own.removed, PlansOrphaned: r.own.plansOrphaned}
}

// ResultOf returns the outcome r carries of c.
func (c *PruneAudit) ResultOf(r Result) RemovedResult { return RemovedResult{Removed: r.own.removed} }

// ResultOf returns the outcome r carries of c.
func (c *TruncateSession) ResultOf(r Result) RemovedResult {
	return RemovedResult{Removed: r.own.removed}
}

// ResultOf returns the outcome r carries of c.
func (c *PutSnapshot) ResultOf(r Result) RemovedResult { return RemovedResult{Removed: r.own.removed} }

// ResultOf returns the outcome r carries of c.
func (c *RecordClientAudit) ResultOf(r Result) RecordedResult {
	return RecordedResult{Recorded: r.own.recorded}
}

// Result returns a Result carrying a (for a store's handler to return).
func (a AppendResult) Result() Result { var r Result; r.SetAppend(a); return r }

// Result returns a Result carrying d.
func (d DeleteResult) Result() Result { var r Result; r.SetDelete(d); return r }

// Result returns a Result carrying x.
func (x RemovedResult) Result() Result { var r Result; r.SetRemoved(x.Removed); return r }

// Result returns a Result carrying x.
func (x RecordedResult) Result() Result { var r Result; r.SetRecorded(x.Recorded); return r }
