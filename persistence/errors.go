package persistence

import (
	"errors"

	"github.com/agentstate/agentstate/messages/errs"
)

// ErrWriterTaken is what Store.Writer returns while another Writer is held
// (FAILED_PRECONDITION). Match it with errors.Is.
var ErrWriterTaken = errs.FailedPrecondition("the store's writer is held; a store has only one")

// ErrFenced is a command-level failure (FAILED_PRECONDITION): the command
// carried an epoch that is no longer its owner's current one, because a newer
// activation of the same session or plan took ownership (see Activate).
// Nothing of the command was stored. The stale owner must stop; its callers
// retry and reach the current owner. Match it with errors.Is.
var ErrFenced = errs.FailedPrecondition("fenced: a newer activation owns this entity")

// StoreError is a store's reading of a failure of the database itself
// (not of one command's input) in op: nil stays nil, an *errs.Error passes
// through unchanged, and anything else is the dialect's classify, which
// names the class (UNAVAILABLE, RESOURCE_EXHAUSTED, INTERNAL) from what
// its driver reports.
func StoreError(op string, err error, classify func(op string, err error) error) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return e
	}
	return classify(op, err)
}
