package session

import (
	"time"

	"github.com/agentstate/agentstate/actors/directory"
)

// Defaults for the zero Config fields.
const (
	DefaultMaxContentBytes = 1 << 20
	DefaultMaxTurnMessages = 1000
	DefaultAskTimeout      = directory.DefaultAskTimeout
	// DefaultImportIdleTimeout: see Config.ImportIdleTimeout.
	DefaultImportIdleTimeout = 5 * time.Minute
	// DefaultExpirySweepInterval: see Config.ExpirySweepInterval.
	DefaultExpirySweepInterval = time.Minute
)

// Limits on the short text fields of a session and a plan link. They are
// not configurable: they bound index keys, not payload.
const (
	maxNameBytes  = 256
	maxLabelBytes = 64
)

// Bounds on one coalesced write: a session actor carries at most this many
// queued appends, or roughly this many bytes, in one AppendMessages, so that
// one busy session cannot make a transaction arbitrarily large.
const (
	maxTurnsPerWrite = 1024
	maxBytesPerWrite = 8 << 20
)

// maxAppendWindow bounds the commit window after an append write (see
// lifecycle's window.go): the next append write waits at most this long,
// and no longer than the last one took, for the callers the last one
// answered, so that closed-loop callers of one session share a write
// instead of alternating in two cohorts. Other writes open no window.
const maxAppendWindow = 2 * time.Millisecond

// Config tunes the sessions service. The zero value is usable.
type Config struct {
	// IdleTimeout passivates a session actor that received nothing for
	// this long (default directory.DefaultIdleTimeout). Negative: never.
	IdleTimeout time.Duration
	// MaxLive bounds the session actors live at once (default
	// directory.DefaultMaxOwners): activating one more passivates the
	// oldest-activated first. Negative: unbounded.
	MaxLive int
	// MaxContentBytes bounds one message's content and any metadata_json
	// (default 1 MiB).
	MaxContentBytes int
	// MaxTurnMessages bounds the messages of one append (default 1000).
	MaxTurnMessages int
	// AuditMessages adds a message_appended audit entry per stored
	// message, in the same transaction (default off: lifecycle events
	// only).
	AuditMessages bool
	// AskTimeout is how long façade calls wait for a session actor's
	// answer, and for the writer on imports (default 30s).
	AskTimeout time.Duration
	// ImportIdleTimeout is how long a streamed import may go without
	// storing a batch before its staged session is taken as abandoned and
	// removed (default 5 minutes); the sweep for such sessions runs at
	// Start and then at this interval.
	ImportIdleTimeout time.Duration
	// Name is the directory's actor name (default DirectoryName). Two
	// Services in one actor system need different names; they then own
	// sessions independently, as two processes would, and only fencing
	// keeps their actors of one session from both writing.
	Name string
	// ExpirySweepInterval is how often expired sessions are looked for
	// and deleted (default 1 minute); negative: never (a test drives
	// the sweep itself).
	ExpirySweepInterval time.Duration
	// Router, when set, carries the façade's writes to their session
	// actors instead of this process's directory: cluster mode (package
	// placement), where any member may own a session.
	Router Router
}

func (c Config) withDefaults() Config {
	directory.ServiceDefaults(&c.IdleTimeout, &c.AskTimeout, &c.MaxLive, &c.Name, DirectoryName)
	if c.MaxContentBytes <= 0 {
		c.MaxContentBytes = DefaultMaxContentBytes
	}
	if c.MaxTurnMessages <= 0 {
		c.MaxTurnMessages = DefaultMaxTurnMessages
	}
	if c.ImportIdleTimeout <= 0 {
		c.ImportIdleTimeout = DefaultImportIdleTimeout
	}
	if c.ExpirySweepInterval == 0 {
		c.ExpirySweepInterval = DefaultExpirySweepInterval
	}
	return c
}
