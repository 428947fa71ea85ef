package sqlite

import (
	"database/sql"
	"errors"
)

// Settling moves the pending index entries of recent appends into the
// per-session index, a slice of sessions per transaction (schema migration 7).

// settleDue settles a slice of the pending entries, enough to bring
// pending down to settleAt less a slice, starting after s.settleFrom and
// wrapping around to the first session once if the end comes first. It
// returns where the next slice starts and how many entries stay pending;
// run stores them once the transaction commits.
func (s *Store) settleDue(a *applier, pending int64) (from string, _ int64) {
	want := pending - s.settleAt + max(1, s.settleAt/settleSlices)
	from = s.settleFrom
	for {
		next, settled, err := a.settle(from, want)
		if err != nil {
			// The batch stands (its rows stay pending and readable);
			// settling is tried again after settleAt more rows.
			s.settleFailures.Add(1)
			return "", 0
		}
		pending, want = max(0, pending-settled), want-settled
		switch {
		case next == "" && from == "":
			// One slice from the first pending entry to the last settled
			// them all, also those an overcount (rows deleted while
			// pending) still counts.
			return "", 0
		case next == "" && want > 0:
			from = "" // the end came first: wrap around
		default:
			return next, pending
		}
	}
}

// settleSlices: a settle takes about settleRows/settleSlices pending
// entries — whole sessions, from where the last one stopped in the
// pending entries' key order — rather than all of them, so that the work
// is spread over the transactions instead of making every 8th of W1 ~4×
// the others (its p99). The slices sweep the sessions round-robin, so a
// session's entries still wait a whole sweep and settle together, about
// settleRows/sessions per index leaf as when all settled at once.
const settleSlices = 8

// settleEndSQL finds the session at which a slice of at least ?2 entries
// after session ?1 ends; no row means the slice runs to the end.
const settleEndSQL = `SELECT session_id FROM message_pending WHERE session_id > ?1
	ORDER BY session_id, sequence LIMIT 1 OFFSET ?2 - 1`

// settleSQL and settleToEndSQL move the pending entries of the sessions
// after ?1 (through ?2) into the per-session index (schema migration 7):
// they copy the entries — (session_id, sequence, id), a few dozen bytes
// each — into message_index in its key order, then delete them from
// message_pending. The content rows are not touched: only the pending
// table's few pages and the index leaves of the sessions settled change.
const (
	settleSQL = `INSERT INTO message_index (session_id, sequence, id)
	SELECT session_id, sequence, id FROM message_pending WHERE session_id > ?1 AND session_id <= ?2
	ORDER BY session_id, sequence`
	settleDeleteSQL = `DELETE FROM message_pending WHERE session_id > ?1 AND session_id <= ?2`
	settleToEndSQL  = `INSERT INTO message_index (session_id, sequence, id)
	SELECT session_id, sequence, id FROM message_pending WHERE session_id > ?1 ORDER BY session_id, sequence`
	settleDeleteToEndSQL = `DELETE FROM message_pending WHERE session_id > ?1`
)

// settle moves the pending entries of the sessions after from — at least
// atLeast entries, whole sessions, or to the end — into message_index, in
// the transaction, so that the move is atomic with the batch that made it
// due: a reader (through the view session_messages) finds every row
// either pending or settled, never both or neither. It returns where the
// next slice starts ("" after the last session) and how many entries
// moved. It runs in a savepoint and its failure is not the batch's: the
// only way it can fail on a healthy database is a pending (session_id,
// sequence) that is also settled (message_index's key refuses it), which
// the compare-and-set of every append rules out; were it to happen, the
// rows stay pending (still unique among the pending, still read) rather
// than every later batch failing.
func (a *applier) settle(from string, atLeast int64) (next string, settled int64, err error) {
	if _, err := a.tx.ExecContext(a.ctx, "SAVEPOINT settle"); err != nil {
		return "", 0, err
	}
	switch err = a.queryRow(settleEndSQL, from, atLeast).Scan(&next); {
	case errors.Is(err, sql.ErrNoRows):
		next = ""
		var res sql.Result
		if res, err = a.exec(settleToEndSQL, from); err == nil {
			if settled, err = res.RowsAffected(); err == nil {
				_, err = a.exec(settleDeleteToEndSQL, from)
			}
		}
	case err == nil:
		var res sql.Result
		if res, err = a.exec(settleSQL, from, next); err == nil {
			if settled, err = res.RowsAffected(); err == nil {
				_, err = a.exec(settleDeleteSQL, from, next)
			}
		}
	}
	if err != nil {
		_, _ = a.tx.ExecContext(a.ctx, "ROLLBACK TO settle; RELEASE settle")
		return "", 0, err
	}
	_, err = a.tx.ExecContext(a.ctx, "RELEASE settle")
	return next, settled, err
}
