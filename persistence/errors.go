package persistence

import "github.com/agentstate/agentstate/messages/errs"

// ErrWriterTaken is what Store.Writer returns while another Writer is held
// (FAILED_PRECONDITION). Match it with errors.Is.
var ErrWriterTaken = errs.FailedPrecondition("the store's writer is held; a store has only one")
