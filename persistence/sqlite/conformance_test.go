package sqlite_test

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/agentstate/agentstate/persistence/storetest"
)

// The fault subtests of the suite run only for stores with these hooks.
var (
	_ storetest.ReadOnlySwitch = (*sqlite.Store)(nil)
	_ storetest.PageLimiter    = (*sqlite.Store)(nil)
	_ storetest.UsageCounter   = (*sqlite.Store)(nil)
)

func TestConformanceFile(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "agentstate.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// The suite again with the writer settling pending message rows every
// three rows (migration 5), so that its sessions hold settled and pending
// rows at once and every read and delete meets both.
func TestConformanceFileSettling(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "agentstate.db"))
		if err != nil {
			t.Fatal(err)
		}
		sqlite.SettleEvery(s, 3)
		return s
	})
}

var memoryNames atomic.Int64

func TestConformanceMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store {
		s, err := sqlite.Open(fmt.Sprintf("memory:conformance-%d", memoryNames.Add(1)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// BenchmarkStore is the benchmark every store runs (storetest.Bench), on
// a database file with the node's durability (WAL, synchronous=FULL).
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) persistence.Store {
		s, err := sqlite.Open(filepath.Join(b.TempDir(), "agentstate.db"))
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}

// BenchmarkItems is the keyed reads' benchmark (storetest.BenchItems):
// GetItem and ListItems pages on sessions of 100 and 10,000 items.
func BenchmarkItems(b *testing.B) {
	storetest.BenchItems(b, func(b *testing.B) persistence.Store {
		s, err := sqlite.Open(filepath.Join(b.TempDir(), "agentstate.db"))
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
