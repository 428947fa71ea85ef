package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrWriterTaken is returned by Store.Writer while another Writer is held.
var ErrWriterTaken = persistence.ErrWriterTaken

// SQLSTATE codes the store acts on.
const (
	codeUniqueViolation     = "23505"
	codeSerializationFail   = "40001"
	codeDeadlock            = "40P01"
	codeReadOnlyTransaction = "25006"
	codeDiskFull            = "53100"
	codeOutOfMemory         = "53200"
	codeTooManyConnections  = "53300"
	codeQueryCanceled       = "57014"
	codeAdminShutdown       = "57P01"
	codeCrashShutdown       = "57P02"
	codeCannotConnectNow    = "57P03"
	codeLockNotAvailable    = "55P03"
	codeIOError             = "58030"
)

// storeErr classifies a failure of the database itself (not of one
// command's input): the whole transaction or query failed.
//
//	53100 disk_full, 53200 out_of_memory            RESOURCE_EXHAUSTED
//	class 08 (connection), 57P01..03 (shutdown),
//	57014 (cancelled), 25006 (read-only), 53300,
//	40001/40P01 (after retries), 55P03, 58030,
//	a lost or closed connection, a closed pool,
//	context cancellation or deadline                UNAVAILABLE
//	anything else                                   INTERNAL
//
// An *errs.Error passes through unchanged.
func storeErr(op string, err error) error { return persistence.StoreError(op, err, classify) }

// classify is storeErr's reading of a driver error.
func classify(op string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == codeDiskFull || pe.Code == codeOutOfMemory:
			return errs.ResourceExhausted("%s: %v", op, err)
		case strings.HasPrefix(pe.Code, "08"),
			pe.Code == codeAdminShutdown, pe.Code == codeCrashShutdown, pe.Code == codeCannotConnectNow,
			pe.Code == codeQueryCanceled, pe.Code == codeReadOnlyTransaction, pe.Code == codeTooManyConnections,
			pe.Code == codeSerializationFail, pe.Code == codeDeadlock, pe.Code == codeLockNotAvailable,
			pe.Code == codeIOError:
			return errs.Unavailable("%s: %v", op, err)
		}
		return errs.Internal("%s: %v", op, err)
	}
	if connectionLost(err) {
		return errs.Unavailable("%s: %v", op, err)
	}
	return errs.Internal("%s: %v", op, err)
}

// connectionLost reports whether err (not a server-reported error) means
// the connection or pool is gone or the call was cut short: the server may
// be fine, and a new connection may succeed.
func connectionLost(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, net.ErrClosed),
		errors.As(err, &ce), errors.As(err, &ne),
		pgconn.Timeout(err), pgconn.SafeToRetry(err):
		return true
	}
	// pgxpool reports a closed pool with a plain error of this text.
	return strings.Contains(err.Error(), "closed pool")
}

// retryable reports whether a transaction that failed with err may simply
// be run again: the server aborted it to resolve a conflict with another
// writer (a deadlock, or a serialization failure).
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == codeDeadlock || pe.Code == codeSerializationFail) || errors.Is(err, errUsageRace)
}

// uniqueViolation returns the violated constraint's name, or "".
// Unique violations are, with data exceptions, the only server errors that
// are the fault of one command; they roll back that command alone.
func uniqueViolation(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeUniqueViolation {
		return pe.ConstraintName
	}
	return ""
}

// dataException turns a server's rejection of one value (SQLSTATE class 22:
// a NUL byte or invalid UTF-8 in text, a number out of range) into the
// command-level INVALID_ARGUMENT it is: the input is wrong, not the
// database. Other errors pass through.
func dataException(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Code, "22") {
		return errs.InvalidArgument("value rejected by the database: %s", pe.Message)
	}
	return err
}
