package audit

// Defaults for Config's zero fields.
const (
	DefaultPruneChunk = 1000
	// DefaultRemoteInFlight bounds the remote senders' requests served at
	// once: each holds a goroutine and its answer (a List page is up to
	// MaxListLimit entries), so a batch of thousands of reads must not
	// all run together.
	DefaultRemoteInFlight = 64
)

// Config tunes the audit service. The zero value is usable: zero fields
// take the defaults.
type Config struct {
	// PruneChunk is the most entries one prune transaction removes.
	PruneChunk int
	// RemoteInFlight is the most remote senders' requests served at once;
	// more are refused with RESOURCE_EXHAUSTED.
	RemoteInFlight int
	// Name is the audit actor's name in its actor system, so remote
	// senders can address it; "" means "audit".
	Name string
}

func (c Config) withDefaults() Config {
	if c.PruneChunk <= 0 {
		c.PruneChunk = DefaultPruneChunk
	}
	if c.RemoteInFlight <= 0 {
		c.RemoteInFlight = DefaultRemoteInFlight
	}
	if c.Name == "" {
		c.Name = "audit"
	}
	return c
}
