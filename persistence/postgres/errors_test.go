package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestStoreErrClassifies(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Severity: "ERROR", Code: code, Message: "m"} }
	cases := []struct {
		err  error
		want errs.Code
	}{
		{pg(codeDiskFull), errs.ResourceExhaustedCode},
		{pg(codeOutOfMemory), errs.ResourceExhaustedCode},
		{fmt.Errorf("wrapped: %w", pg(codeDiskFull)), errs.ResourceExhaustedCode},
		{pg("08006"), errs.UnavailableCode}, // connection_failure
		{pg("08P01"), errs.UnavailableCode}, // protocol_violation
		{pg(codeAdminShutdown), errs.UnavailableCode},
		{pg(codeCrashShutdown), errs.UnavailableCode},
		{pg(codeCannotConnectNow), errs.UnavailableCode},
		{pg(codeReadOnlyTransaction), errs.UnavailableCode},
		{pg(codeQueryCanceled), errs.UnavailableCode},
		{pg(codeTooManyConnections), errs.UnavailableCode},
		{pg(codeDeadlock), errs.UnavailableCode},
		{pg(codeSerializationFail), errs.UnavailableCode},
		{pg("42P01"), errs.InternalCode}, // undefined_table
		{pg("XX000"), errs.InternalCode},
		{context.Canceled, errs.UnavailableCode},
		{context.DeadlineExceeded, errs.UnavailableCode},
		{io.ErrUnexpectedEOF, errs.UnavailableCode},
		{fmt.Errorf("write: %w", syscall.ECONNRESET), errs.UnavailableCode},
		{pgconn.ErrConnClosed, errs.UnavailableCode},
		{errors.New("closed pool"), errs.UnavailableCode},
		{errors.New("cannot scan"), errs.InternalCode},
		{errs.NotFound("x"), errs.NotFoundCode},
	}
	for _, c := range cases {
		if got := errs.CodeOf(storeErr("op", c.err)); got != c.want {
			t.Errorf("storeErr(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if storeErr("op", nil) != nil {
		t.Errorf("storeErr(nil) is not nil")
	}
}

func TestCommandLevelServerErrors(t *testing.T) {
	err := dataException(&pgconn.PgError{Code: "22021", Message: "invalid byte sequence"})
	if errs.CodeOf(err) != errs.InvalidArgumentCode {
		t.Errorf("data exception: %v, want INVALID_ARGUMENT", err)
	}
	if other := errors.New("x"); dataException(other) != other {
		t.Errorf("dataException changed a non-data error")
	}
	uv := &pgconn.PgError{Code: codeUniqueViolation, ConstraintName: "audit_log_event_id_key"}
	if got := uniqueViolation(fmt.Errorf("w: %w", uv)); got != "audit_log_event_id_key" {
		t.Errorf("uniqueViolation = %q", got)
	}
	if got := uniqueViolation(&pgconn.PgError{Code: "23503", ConstraintName: "fk"}); got != "" {
		t.Errorf("a foreign-key violation read as unique: %q", got)
	}
	if !retryable(&pgconn.PgError{Code: codeDeadlock}) || retryable(&pgconn.PgError{Code: codeDiskFull}) {
		t.Errorf("retryable misclassifies")
	}
}
