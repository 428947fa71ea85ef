package persistence

import "github.com/agentstate/agentstate/messages/errs"

// ErrWriterTaken is what Store.Writer returns while another Writer is held
// (FAILED_PRECONDITION). Match it with errors.Is.
var ErrWriterTaken = errs.FailedPrecondition("the store's writer is held; a store has only one")

// ErrFenced is a command-level failure (FAILED_PRECONDITION): the command
// carried an epoch that is no longer its owner's current one, because a newer
// activation of the same session or plan took ownership (see Activate).
// Nothing of the command was stored. The stale owner must stop; its callers
// retry and reach the current owner. Match it with errors.Is.
var ErrFenced = errs.FailedPrecondition("fenced: a newer activation owns this entity")
