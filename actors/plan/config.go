package plan

import (
	"time"

	"github.com/agentstate/agentstate/actors/directory"
)

// DefaultAskTimeout bounds how long façade calls wait for an answer.
const DefaultAskTimeout = directory.DefaultAskTimeout

// Config tunes the plans service. The zero value is usable.
type Config struct {
	// IdleTimeout passivates a plan actor that received nothing for this
	// long (default directory.DefaultIdleTimeout). Negative: never.
	IdleTimeout time.Duration
	// MaxLive bounds the plan actors live at once (default
	// directory.DefaultMaxOwners): activating one more passivates the
	// oldest-activated first. Negative: unbounded.
	MaxLive int
	// AskTimeout is how long façade calls wait for an answer when their
	// context has no earlier deadline, and how long a plan actor waits
	// for its state to load (default DefaultAskTimeout).
	AskTimeout time.Duration
	// MaxMessageBytes bounds a record's message, stack_summary and
	// attributes_json, and a MergeErrorDetails payload (default
	// DefaultMaxMessageBytes). The other writers' keys of one plan's
	// error_details may take four times as much in total, counted as
	// stored (the rendered JSON of those keys, escapes included); a merge
	// past that is INVALID_ARGUMENT.
	MaxMessageBytes int
	// Name is the directory's actor name (default DirectoryName). Two
	// Services in one actor system need different names; they then own
	// plans independently, as two processes would, and only fencing
	// keeps their actors of one plan from both writing.
	Name string
	// Router, when set, carries the façade's writes to their plan actors
	// instead of this process's directory: cluster mode (package
	// placement), where any member may own a plan.
	Router Router
}

func (c Config) withDefaults() Config {
	directory.ServiceDefaults(&c.IdleTimeout, &c.AskTimeout, &c.MaxLive, &c.Name, DirectoryName)
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return c
}

func (c Config) maxDetailsBytes() int { return 4 * c.MaxMessageBytes }
