package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/agentstate/agentstate/node/server"
)

// TestServeSetsASoftMemoryLimitFromTheBudgets: without GOMEMLIMIT, node
// serve bounds its garbage as its byte budgets bound its live heap
// (issue 15's soak without GOMEMLIMIT: a live heap of 210 MiB, a GC target
// of 400, and the node died of its address-space limit). The limit follows
// the budgets' flags; GOMEMLIMIT in the environment wins.
func TestServeSetsASoftMemoryLimitFromTheBudgets(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		t.Cleanup(func() { os.Setenv("GOMEMLIMIT", v) })
	}
	os.Unsetenv("GOMEMLIMIT")
	debug.SetMemoryLimit(math.MaxInt64)

	if got := limitMemory(server.DefaultConfig()); got != 576<<20 || debug.SetMemoryLimit(-1) != 576<<20 {
		t.Fatalf("with the default budgets: limit %d MiB, runtime's %d MiB; want 576 MiB", got>>20, debug.SetMemoryLimit(-1)>>20)
	}
	f := server.DefaultConfig()
	f.BacklogBytes = 256 << 20
	if got := limitMemory(f); got != 960<<20 {
		t.Fatalf("with --backlog-bytes 256 MiB: limit %d MiB, want 960 MiB", got>>20)
	}

	t.Setenv("GOMEMLIMIT", "off")
	debug.SetMemoryLimit(math.MaxInt64)
	if got := limitMemory(server.DefaultConfig()); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("with GOMEMLIMIT set, node serve set a limit of %d MiB", debug.SetMemoryLimit(-1)>>20)
	}
}
