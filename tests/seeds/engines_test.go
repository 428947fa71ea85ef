package seeds_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/agentstate/agentstate/tests/baseline"
)

// engineRounds fresh URLs are each opened by 64 goroutines at once.
// Observed on the baseline (2 busy cores, 20 rounds a run; the 24 runs of
// audit_test.go's note): more than
// one engine in 19–20 of 20 rounds (hundreds of engines in all), under
// -race, without, and with GOMAXPROCS=1.
const engineRounds = 20

// engineOpener is one implementation of "open the database at this URL":
// it opens the URL once per goroutine and reports what the round built.
type engineOpener struct {
	name string
	// round opens one fresh database URL from n goroutines at once and
	// returns the handle each got and how many databases were created.
	round func(t *testing.T, round, n int) (handles []any, created int64)
	// racy: the implementation is the seed's design, the bug must show.
	racy bool
}

// Seed 004 (#7566): a check-then-set on the global engine cache lets two
// UnitOfWorks that start together create two engines for one in-memory
// URL — two different databases.
func TestSeedEngineCache(t *testing.T) {
	impls := []engineOpener{
		{name: "baseline", racy: true, round: func(t *testing.T, round, n int) ([]any, int64) {
			cache := baseline.NewEngineCache()
			uows := make([]*baseline.UnitOfWork, n)
			for i := range uows {
				uows[i] = baseline.NewUnitOfWork(cache, baseline.MemoryURL)
			}
			handles := make([]any, n)
			together(n, func(i int) {
				e, err := uows[i].Engine()
				if err != nil {
					t.Error(err)
					return
				}
				handles[i] = e
			})
			for _, u := range uows {
				u.Close()
			}
			return handles, cache.Created()
		}},
		{name: "agentstate", round: func(t *testing.T, round, n int) ([]any, int64) {
			url := fmt.Sprintf("memory:seed004-%s-%d", t.Name(), round)
			url = sanitizeMemoryName(url)
			before := sqlite.Opens()
			stores := make([]*sqlite.Store, n)
			var failed atomic.Int64
			together(n, func(i int) {
				s, err := sqlite.Open(url)
				if err != nil {
					failed.Add(1)
					t.Error(err)
					return
				}
				stores[i] = s
			})
			created := sqlite.Opens() - before
			handles := make([]any, n)
			for i, s := range stores {
				handles[i] = s
			}
			for _, s := range stores {
				if s != nil {
					if err := s.Close(); err != nil {
						t.Error(err)
					}
				}
			}
			return handles, created
		}},
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			var multiRounds, split int
			var created int64
			for r := range engineRounds {
				handles, c := impl.round(t, r, workers)
				created += c
				if c > 1 {
					multiRounds++
				}
				if distinct(handles) > 1 {
					split++ // UnitOfWorks of one round hold different databases
				}
				if !impl.racy && (c != 1 || distinct(handles) != 1) {
					t.Errorf("round %d: %d databases opened, %d distinct handles; want 1 and 1", r, c, distinct(handles))
				}
			}
			t.Logf("%s: %d/%d rounds created more than one engine (%d engines for %d URLs); %d rounds handed out more than one",
				impl.name, multiRounds, engineRounds, created, engineRounds, split)
			if impl.racy && multiRounds == 0 {
				t.Errorf("the stress test did not catch seed 004 on the baseline: one engine per URL in all %d rounds", engineRounds)
			}
		})
	}
}

// distinct counts the different non-nil handles.
func distinct(handles []any) int {
	set := map[any]bool{}
	for _, h := range handles {
		if h != nil {
			set[h] = true
		}
	}
	return len(set)
}

// sanitizeMemoryName keeps a memory URL within [A-Za-z0-9._-].
func sanitizeMemoryName(url string) string {
	b := []byte(url)
	for i := len("memory:"); i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}
