// Package errs is agentstate's one typed error model, shared by every actor,
// the gRPC API, the Proto.Actor remote endpoint and the CLI.
//
// Every failure agentstate reports is an *Error with a Code and a message
// that says what was wrong. Match codes with errors.Is against the sentinels
// (errors.Is(err, errs.ErrNotFound)) or with CodeOf. An *Error converts to
// the wire (ToProto, FromProto) and to a gRPC status (it implements
// GRPCStatus, so returning it from a gRPC handler yields the right code).
package errs

import (
	"context"
	"errors"
	"fmt"

	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Code is the error classification; see commonv1.ErrorCode for meanings.
type Code = commonv1.ErrorCode

const (
	InvalidArgumentCode    = commonv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT
	NotFoundCode           = commonv1.ErrorCode_ERROR_CODE_NOT_FOUND
	AlreadyExistsCode      = commonv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS
	FailedPreconditionCode = commonv1.ErrorCode_ERROR_CODE_FAILED_PRECONDITION
	ResourceExhaustedCode  = commonv1.ErrorCode_ERROR_CODE_RESOURCE_EXHAUSTED
	UnavailableCode        = commonv1.ErrorCode_ERROR_CODE_UNAVAILABLE
	InternalCode           = commonv1.ErrorCode_ERROR_CODE_INTERNAL
	UnauthenticatedCode    = commonv1.ErrorCode_ERROR_CODE_UNAUTHENTICATED
	// OutcomeUnknownCode is the one code whose error does not promise
	// that nothing was stored: the request may have been applied.
	OutcomeUnknownCode = commonv1.ErrorCode_ERROR_CODE_OUTCOME_UNKNOWN
	// PermissionDeniedCode refuses an authenticated caller whose grants
	// let it read the entity but not do this to it. A caller that may not
	// read the entity gets NOT_FOUND, so that it learns nothing of it.
	PermissionDeniedCode = commonv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED
)

// Error is a typed agentstate failure. Nothing of the failed request was
// stored, unless its Code is OutcomeUnknownCode: then it may have been.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s", codeName(e.Code), e.Msg)
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, ErrNotFound) matches every not-found error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Msg == "" || t.Msg == e.Msg)
}

// GRPCStatus lets gRPC handlers return an *Error directly. The status
// carries the agentstate code itself as a commonv1.Error detail: gRPC has
// no OUTCOME_UNKNOWN (GRPCCode maps it to DEADLINE_EXCEEDED), and a client
// in any language must be able to tell the node's "may have been applied"
// from its own deadline, and each agentstate code from gRPC's own errors.
func (e *Error) GRPCStatus() *status.Status {
	st := status.New(GRPCCode(e.Code), e.Msg)
	if d, err := st.WithDetails(&commonv1.Error{Code: e.Code, Message: e.Msg}); err == nil {
		return d
	}
	return st
}

// detailCode is the agentstate code a status carries in its details
// (GRPCStatus puts it there); ok is false for a status without one, such
// as gRPC's own errors or a peer that predates the detail.
func detailCode(s *status.Status) (Code, bool) {
	for _, d := range s.Details() {
		if e, ok := d.(*commonv1.Error); ok && e.GetCode() != commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
			return e.GetCode(), true
		}
	}
	return 0, false
}

// statusCode classifies a gRPC status: by its agentstate detail when it
// has one, else by the gRPC code.
func statusCode(s *status.Status) Code {
	if c, ok := detailCode(s); ok {
		return c
	}
	return fromGRPCCode(s.Code())
}

// Sentinels for errors.Is; they carry no message.
var (
	ErrInvalidArgument    = &Error{Code: InvalidArgumentCode}
	ErrNotFound           = &Error{Code: NotFoundCode}
	ErrAlreadyExists      = &Error{Code: AlreadyExistsCode}
	ErrFailedPrecondition = &Error{Code: FailedPreconditionCode}
	ErrResourceExhausted  = &Error{Code: ResourceExhaustedCode}
	ErrUnavailable        = &Error{Code: UnavailableCode}
	ErrInternal           = &Error{Code: InternalCode}
	ErrUnauthenticated    = &Error{Code: UnauthenticatedCode}
	ErrOutcomeUnknown     = &Error{Code: OutcomeUnknownCode}
	ErrPermissionDenied   = &Error{Code: PermissionDeniedCode}
)

func newf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

func InvalidArgument(format string, args ...any) *Error {
	return newf(InvalidArgumentCode, format, args...)
}
func NotFound(format string, args ...any) *Error { return newf(NotFoundCode, format, args...) }
func AlreadyExists(format string, args ...any) *Error {
	return newf(AlreadyExistsCode, format, args...)
}
func FailedPrecondition(format string, args ...any) *Error {
	return newf(FailedPreconditionCode, format, args...)
}
func ResourceExhausted(format string, args ...any) *Error {
	return newf(ResourceExhaustedCode, format, args...)
}
func Unavailable(format string, args ...any) *Error { return newf(UnavailableCode, format, args...) }
func Internal(format string, args ...any) *Error    { return newf(InternalCode, format, args...) }
func Unauthenticated(format string, args ...any) *Error {
	return newf(UnauthenticatedCode, format, args...)
}

func PermissionDenied(format string, args ...any) *Error {
	return newf(PermissionDeniedCode, format, args...)
}

// OutcomeUnknown reports a request that reached its owner or the store and
// whose answer was lost: it may have been applied. Callers retry it only
// when the request is idempotent (appends carry message ids).
func OutcomeUnknown(format string, args ...any) *Error {
	return newf(OutcomeUnknownCode, format, args...)
}

// CodeOf classifies any error: an *Error (also wrapped) keeps its code,
// context cancellation and deadlines are UNAVAILABLE, a gRPC status error
// maps back from its code, anything else is INTERNAL. nil gives UNSPECIFIED.
func CodeOf(err error) Code {
	if err == nil {
		return commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return UnavailableCode
	}
	if s, ok := status.FromError(err); ok {
		return statusCode(s)
	}
	return InternalCode
}

// From returns err as an *Error, classifying it with CodeOf when it is not
// one already. nil stays nil.
func From(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if s, ok := status.FromError(err); ok {
		return &Error{Code: statusCode(s), Msg: s.Message()}
	}
	return &Error{Code: CodeOf(err), Msg: err.Error()}
}

// ToProto converts err for the wire; nil stays nil.
func ToProto(err error) *commonv1.Error {
	e := From(err)
	if e == nil {
		return nil
	}
	return &commonv1.Error{Code: e.Code, Message: e.Msg}
}

// FromProto converts a wire error back; nil stays nil.
func FromProto(p *commonv1.Error) error {
	if p == nil {
		return nil
	}
	return &Error{Code: p.GetCode(), Msg: p.GetMessage()}
}

// GRPCCode maps a Code to the gRPC code of the same name. gRPC has no
// OUTCOME_UNKNOWN; it becomes DEADLINE_EXCEEDED, whose contract is the same
// ("for operations that change the state of the system, this error may be
// returned even if the operation has completed successfully") and which
// generic gRPC clients already do not retry blindly. UNKNOWN, the other
// candidate, is also what grpc-go answers for a handler's untyped error or
// panic, so it would mix bugs into "maybe applied". A client's own deadline
// maps back to OUTCOME_UNKNOWN as well, which is what it means.
func GRPCCode(c Code) codes.Code {
	switch c {
	case InvalidArgumentCode:
		return codes.InvalidArgument
	case NotFoundCode:
		return codes.NotFound
	case AlreadyExistsCode:
		return codes.AlreadyExists
	case FailedPreconditionCode:
		return codes.FailedPrecondition
	case ResourceExhaustedCode:
		return codes.ResourceExhausted
	case UnavailableCode:
		return codes.Unavailable
	case UnauthenticatedCode:
		return codes.Unauthenticated
	case OutcomeUnknownCode:
		return codes.DeadlineExceeded
	case PermissionDeniedCode:
		return codes.PermissionDenied
	default:
		return codes.Internal
	}
}

func fromGRPCCode(c codes.Code) Code {
	switch c {
	case codes.InvalidArgument, codes.OutOfRange:
		return InvalidArgumentCode
	case codes.NotFound:
		return NotFoundCode
	case codes.AlreadyExists:
		return AlreadyExistsCode
	case codes.FailedPrecondition:
		return FailedPreconditionCode
	case codes.ResourceExhausted:
		return ResourceExhaustedCode
	case codes.Unavailable, codes.Canceled:
		return UnavailableCode
	case codes.DeadlineExceeded:
		return OutcomeUnknownCode
	case codes.Unauthenticated:
		return UnauthenticatedCode
	case codes.PermissionDenied:
		return PermissionDeniedCode
	default:
		return InternalCode
	}
}

func codeName(c Code) string {
	switch c {
	case InvalidArgumentCode:
		return "invalid argument"
	case NotFoundCode:
		return "not found"
	case AlreadyExistsCode:
		return "already exists"
	case FailedPreconditionCode:
		return "failed precondition"
	case ResourceExhaustedCode:
		return "resource exhausted"
	case UnavailableCode:
		return "unavailable"
	case UnauthenticatedCode:
		return "unauthenticated"
	case InternalCode:
		return "internal"
	case OutcomeUnknownCode:
		return "outcome unknown"
	case PermissionDeniedCode:
		return "permission denied"
	default:
		return "unknown"
	}
}
