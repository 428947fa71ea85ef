package postgres

import (
	"testing"

	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/storetest"
)

// The read-only fault subtests of the suite run through this hook. A full
// disk cannot be simulated on a shared server; its mapping is tested in
// errors_test.go.
var _ storetest.ReadOnlySwitch = (*Store)(nil)

// Every store counts stored bytes (the suite compares its totals with a
// recount).
var _ storetest.UsageCounter = (*Store)(nil)

// TestConformance runs the suite on the default trail of
// persistence.MaxAuditChains chains.
func TestConformance(t *testing.T) {
	requireServer(t)
	storetest.Run(t, func(t *testing.T) persistence.Store {
		s, _ := openFresh(t)
		return s
	})
}

// BenchmarkStore is the benchmark every store runs (storetest.Bench), on a
// fresh schema. The test cluster of .ci/postgres.sh runs with fsync off, so
// its commits cost no disk flush: compare CPU per row with SQLite's, not
// rates.
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) persistence.Store {
		s, _ := openFresh(b)
		return s
	})
}

// BenchmarkItems is the keyed reads' benchmark (storetest.BenchItems):
// GetItem and ListItems pages on sessions of 100 and 10,000 items.
func BenchmarkItems(b *testing.B) {
	storetest.BenchItems(b, func(b *testing.B) persistence.Store {
		s, _ := openFresh(b)
		return s
	})
}
