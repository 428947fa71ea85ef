package checker

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// NodeBuild builds ./cmd/node at most once per test process and removes it
// at Remove. Test packages that drive node subprocesses share it.
type NodeBuild struct {
	once sync.Once
	path string
	dir  string
	err  error
}

// Path returns the node binary: override when it is set, else one built
// into a temporary directory. race is "on", "off" or anything else for
// raceDefault (whether the test binary itself runs under -race).
func (b *NodeBuild) Path(t testing.TB, override, race string, raceDefault bool) string {
	t.Helper()
	b.once.Do(func() {
		if override != "" {
			b.path = override
			return
		}
		if b.dir, b.err = os.MkdirTemp("", "agentstate-node-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "node")
		withRace := raceDefault
		switch race {
		case "on":
			withRace = true
		case "off":
			withRace = false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		b.err = BuildNode(ctx, b.path, withRace)
		t.Logf("built node (race=%v) in %v", withRace, time.Since(start).Round(time.Millisecond))
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Remove deletes a binary Path built.
func (b *NodeBuild) Remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// Seed returns s, or a time-based seed when s is 0, and logs how to rerun.
func Seed(t testing.TB, s uint64) uint64 {
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -args -seed=%d)", s, s)
	return s
}
