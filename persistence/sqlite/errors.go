package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// ErrWriterTaken is returned by Store.Writer while another Writer is held.
var ErrWriterTaken = persistence.ErrWriterTaken

// storeErr classifies a failure of the database itself (not of one
// command's input): the whole transaction or query failed.
//
//	SQLITE_FULL                               RESOURCE_EXHAUSTED
//	SQLITE_READONLY, IOERR, CANTOPEN, BUSY,
//	LOCKED, interrupt, closed, cancelled      UNAVAILABLE
//	anything else                             INTERNAL
//
// An *errs.Error passes through unchanged.
func storeErr(op string, err error) error { return persistence.StoreError(op, err, classify) }

// classify is storeErr's reading of a driver error.
func classify(op string, err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrFull:
			return errs.ResourceExhausted("%s: database is full: %v", op, err)
		case sqlite3.ErrReadonly, sqlite3.ErrIoErr, sqlite3.ErrCantOpen, sqlite3.ErrBusy,
			sqlite3.ErrLocked, sqlite3.ErrInterrupt, sqlite3.ErrProtocol:
			return errs.Unavailable("%s: %v", op, err)
		}
		return errs.Internal("%s: %v", op, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, sql.ErrTxDone) {
		return errs.Unavailable("%s: %v", op, err)
	}
	if err.Error() == "sql: database is closed" {
		return errs.Unavailable("%s: store is closed", op)
	}
	return errs.Internal("%s: %v", op, err)
}

// constraint reports the extended code of a constraint violation, or 0.
// Constraint violations are the only database errors that are the fault of
// one command; they roll back that command alone.
func constraint(err error) sqlite3.ErrNoExtended {
	var se sqlite3.Error
	if errors.As(err, &se) && se.Code == sqlite3.ErrConstraint {
		return se.ExtendedCode
	}
	return 0
}
