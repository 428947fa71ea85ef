package audit

// Defaults for Config's zero fields.
const DefaultPruneChunk = 1000

// Config tunes the audit service. The zero value is usable: zero fields
// take the defaults.
type Config struct {
	// PruneChunk is the most entries one prune transaction removes.
	PruneChunk int
	// Name is the audit actor's name in its actor system, so remote
	// senders can address it; "" means "audit".
	Name string
}

func (c Config) withDefaults() Config {
	if c.PruneChunk <= 0 {
		c.PruneChunk = DefaultPruneChunk
	}
	if c.Name == "" {
		c.Name = "audit"
	}
	return c
}
