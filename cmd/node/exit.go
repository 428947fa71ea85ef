package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc/status"
)

// Exit statuses of the node command. Each error class of the API has its
// own, so scripts can tell "retry later" from "fix the request".
const (
	exitOK                 = 0
	exitFailure            = 1 // a local failure: unreadable file, bad JSON input, a serve failure
	exitUsage              = 2 // a bad command line
	exitInvalidArgument    = 3
	exitNotFound           = 4
	exitAlreadyExists      = 5
	exitFailedPrecondition = 6
	exitResourceExhausted  = 7
	exitUnavailable        = 8
	exitUnauthenticated    = 9
	exitInternal           = 10
	exitOutcomeUnknown     = 11 // the request may have been applied: check before retrying
	exitPermissionDenied   = 12 // the credentials may read the entity but not do this to it
)

// remoteError reports whether err came from the node (a gRPC status or a
// typed agentstate error) rather than from this process.
func remoteError(err error) (*errs.Error, bool) {
	var e *errs.Error
	if errors.As(err, &e) {
		return e, true
	}
	if s, ok := status.FromError(err); ok {
		return errs.From(s.Err()), true
	}
	return nil, false
}

// exitCode maps err to the process exit status.
func exitCode(err error) int {
	e, ok := remoteError(err)
	if !ok {
		return exitFailure
	}
	switch e.Code {
	case errs.InvalidArgumentCode:
		return exitInvalidArgument
	case errs.NotFoundCode:
		return exitNotFound
	case errs.AlreadyExistsCode:
		return exitAlreadyExists
	case errs.FailedPreconditionCode:
		return exitFailedPrecondition
	case errs.ResourceExhaustedCode:
		return exitResourceExhausted
	case errs.UnavailableCode:
		return exitUnavailable
	case errs.UnauthenticatedCode:
		return exitUnauthenticated
	case errs.OutcomeUnknownCode:
		return exitOutcomeUnknown
	case errs.PermissionDeniedCode:
		return exitPermissionDenied
	default:
		return exitInternal
	}
}

// writeError prints err on w as one JSON object:
// {"error":{"code":"NOT_FOUND","message":"..."}}. Local failures have code
// "LOCAL". A failed append also names its messages' ids
// ("message_ids"), to retry it with.
func writeError(w io.Writer, err error) {
	type body struct {
		Code       string   `json:"code"`
		Message    string   `json:"message"`
		MessageIDs []string `json:"message_ids,omitempty"`
	}
	b := body{Code: "LOCAL", Message: err.Error()}
	if e, ok := remoteError(err); ok {
		b = body{Code: codeLabel(e.Code), Message: e.Msg}
	}
	var af *appendFailed
	if errors.As(err, &af) {
		b.MessageIDs = af.messageIDs
	}
	out, mErr := json.Marshal(map[string]body{"error": b})
	if mErr != nil {
		fmt.Fprintf(w, "error: %v\n", err)
		return
	}
	fmt.Fprintf(w, "%s\n", out)
}

// codeLabel is the short name of c: "NOT_FOUND" for ERROR_CODE_NOT_FOUND.
func codeLabel(c errs.Code) string {
	const prefix = "ERROR_CODE_"
	name := commonv1.ErrorCode_name[int32(c)]
	if len(name) > len(prefix) {
		return name[len(prefix):]
	}
	return "UNSPECIFIED"
}
