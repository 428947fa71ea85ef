package writer

import "github.com/agentstate/agentstate/persistence"

// Submit asks the writer actor to apply Cmd in its next group commit. Send it
// with ctx.Request(writerPID, &Submit{...}) so that the sender is set: the
// writer answers the sender with one *Applied once the transaction that
// carried Cmd has committed (with synchronous=FULL: is durable) or failed.
//
// Commands from one sender are applied in the order they were submitted.
type Submit struct {
	Cmd persistence.Command
	// Tag is echoed in Applied, so a sender can match replies.
	Tag uint64
}

// Applied answers a Submit.
type Applied struct {
	Tag uint64
	// Result.Err is non-nil when the command failed: on its own (the
	// command-level errors of persistence) or because its whole
	// transaction rolled back (RESOURCE_EXHAUSTED, UNAVAILABLE, INTERNAL).
	// Then nothing of the command is stored.
	Result persistence.Result
}
