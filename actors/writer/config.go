package writer

import (
	"log/slog"
	"time"

	"github.com/agentstate/agentstate/persistence"
)

// Defaults for Config's zero fields.
const (
	DefaultMaxBatchCommands = 4096
	DefaultMaxBatchBytes    = 8 << 20
	DefaultRetryBackoff     = 10 * time.Millisecond
	DefaultCommitWindow     = 2 * time.Millisecond
	MaxRetryBackoff         = time.Second
)

// Config tunes the writer. The zero value is usable: zero fields take the
// defaults above.
type Config struct {
	// MaxBatchCommands and MaxBatchBytes bound one transaction: a group
	// commit takes the pending commands in arrival order until either
	// bound would be exceeded (a single command larger than
	// MaxBatchBytes still goes, alone).
	MaxBatchCommands int
	MaxBatchBytes    int
	// Backlog is the number of commands that may be pending at once,
	// and BacklogBytes the bytes they may carry (see Backlog).
	Backlog      int
	BacklogBytes int64
	// RetryBackoff is the pause after a rolled-back transaction before
	// the next one starts; it doubles on each further failure up to
	// MaxRetryBackoff and resets on a commit.
	RetryBackoff time.Duration
	// CommitWindow bounds how long, after a commit, the next transaction
	// waits for the senders that commit answered to send again (see
	// window): at most this long, and about as long as the last
	// transaction took unless its senders were seen to come back more
	// slowly. Zero means DefaultCommitWindow; negative: the
	// next transaction starts at once.
	CommitWindow time.Duration
	// Observer receives the writer's metrics; nil means none.
	Observer Observer
	// Logger reports rolled-back transactions; nil means slog.Default().
	Logger *slog.Logger
	// Name is the writer actor's name in its actor system; "" means
	// "writer".
	Name string
	// OnCommit, when set, is called after each transaction committed,
	// with its commands and their results (results[i] is cmds[i]'s),
	// before their senders are answered (the live feeds' hook,
	// feed.Hub.OnCommit). It runs on the transaction goroutine and must
	// not block; neither may be modified.
	OnCommit func(cmds []persistence.Command, results []persistence.Result)
}

// Observer is told what the writer does, for metrics. Its methods are
// called from the writer actor, one at a time, and must not block.
type Observer interface {
	// BatchCommitted reports one transaction: the commands it carried
	// (each merged record counts as one), their estimated bytes, how
	// long Apply took, and the error when it rolled back.
	BatchCommitted(commands, bytes int, dur time.Duration, err error)
	// AsyncRetried reports async records whose transaction rolled back:
	// they were answered as accepted, are not durable yet, and stay
	// queued for the next transaction.
	AsyncRetried(entries int, err error)
	// AsyncLost reports async records that will never be stored: a
	// command-level failure (the store refused the entries themselves),
	// or a Stop whose deadline ended the drain before they committed.
	AsyncLost(entries int, err error)
}

func (c Config) withDefaults() Config {
	if c.MaxBatchCommands <= 0 {
		c.MaxBatchCommands = DefaultMaxBatchCommands
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.Backlog <= 0 {
		c.Backlog = DefaultBacklog
	}
	if c.BacklogBytes <= 0 {
		c.BacklogBytes = DefaultBacklogBytes
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.CommitWindow == 0 {
		c.CommitWindow = DefaultCommitWindow
	}
	if c.Name == "" {
		c.Name = "writer"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
