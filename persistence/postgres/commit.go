package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// commitTimeout bounds COMMIT (which runs without the caller's
	// cancellation); past it the connection is closed and the outcome is
	// looked up.
	commitTimeout = 30 * time.Second
	// resolveTimeout bounds looking up the outcome of a COMMIT whose
	// answer was lost.
	resolveTimeout = 10 * time.Second
)

// errOutcomeUnknown describes the one case in which Apply cannot keep the
// contract's promise that an error means nothing was stored: COMMIT's
// answer was lost and the server could not be asked in time whether the
// transaction committed. Apply answers it OUTCOME_UNKNOWN, not UNAVAILABLE,
// so that nobody retries a request that may be stored unless it is
// idempotent.
var errOutcomeUnknown = errors.New("commit outcome unknown: the connection was lost during COMMIT " +
	"and the server could not be asked whether the transaction committed")

// commitTx commits tx, whose transaction id is xid. A nil error means
// committed; otherwise the transaction did not commit (or, only for
// errOutcomeUnknown, nobody could tell), and runAgain says that a new
// attempt may succeed.
//
// A COMMIT that the server answers with an error rolled back. A COMMIT whose
// answer never arrives (the connection broke, or commitTimeout passed and
// pgx closed it) may have committed: then a new connection asks the server
// for pg_xact_status(xid), which says committed or aborted once the old
// backend is done (it aborts an open transaction as soon as it sees its
// client gone). Called with wmu held.
func (s *Store) commitTx(ctx context.Context, conn *pgx.Conn, tx pgx.Tx, xid string) (outcome, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	err := s.commit(cctx, tx)
	cancel()
	if err == nil {
		return finished, nil
	}
	var pe *pgconn.PgError
	if errors.Is(err, pgx.ErrTxCommitRollback) || (errors.As(err, &pe) && !conn.IsClosed()) {
		// The server answered: rolled back.
		if retryable(err) {
			return runAgain, err
		}
		return finished, err
	}
	s.dropConn()
	committed, rerr := s.resolveCommit(context.WithoutCancel(ctx), xid)
	switch {
	case rerr != nil:
		return finished, errs.OutcomeUnknown("apply: %v (%v; looking it up: %v)", errOutcomeUnknown, err, rerr)
	case committed:
		return finished, nil
	case ctx.Err() != nil:
		return finished, err
	}
	// Rolled back with the lost connection: nothing was stored, and the
	// new connection may do better.
	return runAgain, err
}

// resolveCommit asks the server whether transaction xid committed, on a new
// writer connection, waiting while it is still in progress. Called with wmu
// held.
func (s *Store) resolveCommit(ctx context.Context, xid string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	if err := s.connect(ctx); err != nil {
		return false, err
	}
	wait := time.Millisecond
	for {
		var status *string
		if err := s.wconn.QueryRow(ctx, "SELECT pg_xact_status($1::xid8)", xid).Scan(&status); err != nil {
			s.afterFailure()
			return false, err
		}
		switch {
		case status == nil:
			return false, errors.New("transaction " + xid + " is too old to look up")
		case *status == "committed":
			return true, nil
		case *status == "aborted":
			return false, nil
		}
		// "in progress": the old backend has not finished yet.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}
