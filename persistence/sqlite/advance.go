package sqlite

import (
	"fmt"
	"strings"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// An append's session row moves from the sequence the actor expected to the
// next one, but only where the row still stands at the expected sequence and
// the command's epoch is the session's current one (see checkEpoch): that
// compare-and-set is what keeps two writers from both advancing a session.
// Without savepoints, the advances of all the attempt's appends wait in
// applier.advances and are applied by one UPDATE per advanceChunks rows
// rather than an epoch query and an UPDATE per command; with savepoints,
// each append applies its own advance with the same UPDATE. The UPDATE must
// change exactly one row per advance; if it changes fewer, some command met
// a moved sequence, a stale epoch or a missing session, and the attempt is
// replayed with savepoints, where each command checks its own and gets its
// own error.
type advance struct {
	sessionID string
	expect    int64
	next      int64
	touch     bool // stored rows: updated_at moves too
	updatedAt int64
	epoch     int64
	setState  bool // a stored turn changed the session's state to state
	state     string
}

var advanceChunks = [...]int{256, 64, 16, 4, 1}

var advanceSQL = map[int]string{}

func init() {
	for _, n := range advanceChunks {
		advanceSQL[n] = `UPDATE sessions SET next_sequence = v.column3,
	updated_at = CASE WHEN v.column4 THEN v.column5 ELSE sessions.updated_at END,
	state_json = CASE WHEN v.column7 THEN v.column8 ELSE sessions.state_json END
	FROM (VALUES ` + strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?), ", n-1) + `(?, ?, ?, ?, ?, ?, ?, ?)) AS v
	WHERE sessions.session_id = v.column1 AND sessions.next_sequence = v.column2
	AND COALESCE((SELECT epoch FROM owners WHERE kind = ` + fmt.Sprint(int64(persistence.OwnerSession)) +
			` AND id = v.column1), 0) = v.column6`
	}
}

// errAdvanceMissed fails an attempt without savepoints whose pooled UPDATE
// did not advance every session; the replay with savepoints names the
// command and its cause.
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
	return inChunks(&a.advances, advanceChunks[:], a.applyAdvances)
}

// applyAdvances runs vs (len one of advanceChunks) as one UPDATE.
func (a *applier) applyAdvances(vs []advance) error {
	args := a.args[:0]
	for _, v := range vs {
		args = append(args, v.sessionID, v.expect, v.next, v.touch, v.updatedAt, v.epoch, v.setState, v.state)
	}
	res, err := a.exec(advanceSQL[len(vs)], args...)
	clear(args)
	a.args = args[:0]
	if err != nil {
		return err
	}
	changed, err := rowsAffected(res)
	if err != nil {
		return err
	}
	if changed != int64(len(vs)) {
		return errAdvanceMissed
	}
	return nil
}
