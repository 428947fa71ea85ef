package sqlite

import (
	"fmt"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// An append's session row moves from the sequence the actor expected to the
// next one, but only where the row still stands at the expected sequence and
// the command's epoch is the session's current one (see checkEpoch): that
// compare-and-set is what keeps two writers from both advancing a session.
// Without savepoints, the advances of all the attempt's appends wait in
// applier.advances and are applied after the attempt's appends, each by
// advanceSQL, which checks the epoch itself (rather than an epoch query and
// an UPDATE per command); with savepoints, each append applies its own
// advance at once with the same statement. The UPDATE must change exactly
// one row; if it changes none, the command met a moved sequence, a stale
// epoch or a missing session, and the attempt is replayed with savepoints,
// where each command checks its own and gets its own error.
type advance struct {
	sessionID string
	expect    int64
	next      int64
	touch     bool // stored rows: updated_at moves too
	updatedAt int64
	epoch     int64
	setState  bool // a stored turn changed the session's state to state
	state     string
	// bytes are the stored bytes the queued turns add (usage.go), booked
	// in namespace ns when checkNS: the advance then matches the session
	// only if ns is its stored namespace (a cached one, see sessionNames).
	bytes   int64
	ns      string
	checkNS bool
}

// advanceSQL is one advance. (Pooled advances used to go as one UPDATE …
// FROM (VALUES …) of up to 256 rows; SQLite 3.54 materializes the VALUES
// and the join into ephemeral tables for it, which cost the writer 0.5–1 ms
// of CPU per statement whatever its rows — most of a W2 transaction's CPU,
// where a one-row UPDATE through the statement cache takes tens of µs and
// 64 of them cost no more than the pooled one: docs/bench/HISTORY.md, issue
// 17.)
var advanceSQL = `UPDATE sessions SET next_sequence = ?3,
	updated_at = CASE WHEN ?4 THEN ?5 ELSE updated_at END,
	state_json = CASE WHEN ?7 THEN ?8 ELSE state_json END
	WHERE session_id = ?1 AND next_sequence = ?2
	AND COALESCE((SELECT epoch FROM owners WHERE kind = ` + fmt.Sprint(int64(persistence.OwnerSession)) + ` AND id = ?1), 0) = ?6
	AND (NOT ?9 OR namespace = ?10)`

// errAdvanceMissed fails an attempt without savepoints one of whose queued
// advances changed no row; the replay with savepoints names the command and
// its cause.
var errAdvanceMissed = errs.FailedPrecondition("an append's session did not stand at its expected sequence and epoch; replayed command by command")

// advanceOf is c's advance to next, and to state when a stored turn
// changed it (state != ""). An attempt with savepoints applies it at once,
// alone; one without queues it.
func advanceOf(c *persistence.AppendMessages, next int64, state string) (advance, error) {
	stored := (next != c.NextSequence || state != "") && !c.UpdatedAt.IsZero()
	var at int64
	if stored {
		var err error
		if at, err = persistence.StoredTimeNanos("updated_at", c.UpdatedAt); err != nil {
			return advance{}, persistence.Of("session", c.SessionID, err)
		}
	}
	return advance{sessionID: c.SessionID, expect: c.NextSequence, next: next,
		touch: stored, updatedAt: at, epoch: c.Epoch, setState: state != "", state: state}, nil
}

// flushAdvances applies the queued advances. Like flushMessages, the
// attempt calls it before any command other than an append and before the
// commit.
func (a *applier) flushAdvances() error {
	for len(a.advances) > 0 {
		if err := a.applyAdvance(a.advances[0]); err != nil {
			return err
		}
		a.advances = a.advances[1:]
	}
	a.advances = nil
	return nil
}

// applyAdvance runs advanceSQL for v, and books v's bytes in the
// namespace it checked.
func (a *applier) applyAdvance(v advance) error {
	res, err := a.exec(advanceSQL, v.sessionID, v.expect, v.next, v.touch, v.updatedAt, v.epoch, v.setState, v.state, v.checkNS, v.ns)
	if err != nil {
		return err
	}
	changed, err := rowsAffected(res)
	if err != nil {
		return err
	}
	if changed != 1 {
		return errAdvanceMissed
	}
	if v.checkNS {
		a.usage.AddNamespace(v.ns, v.bytes)
	}
	return nil
}
