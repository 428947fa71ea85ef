package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/persistence/postgres/pgtest"
)

// The PostgreSQL store in-process and its raw ceiling store every append
// of a small W1-like run, dense and in order, each on a database of its
// own that is dropped after, and both say the server's durability.
func TestPostgresInProcessAndCeilingComplete(t *testing.T) {
	base := pgtest.Base(t)
	for _, mode := range []Mode{ModeInProcess, ModeRawClosed} {
		cfg := Config{Mode: mode, Name: "W1", Sessions: 8, Callers: 8, Appends: 512, DataDir: t.TempDir(), Postgres: base}
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if !res.Complete || res.Appends != 512 || res.Unacked > 0 {
			t.Fatalf("%s: not every append stored, in order: %+v", mode, res)
		}
		if !strings.HasPrefix(res.Synchronous, pgDurabilityPrefix) {
			t.Fatalf("%s: durability %q", mode, res.Synchronous)
		}
	}
}
