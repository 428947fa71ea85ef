package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the node's garbage-collection target when the GOGC
// environment variable does not set one. A node runs thousands of
// goroutines (one per gRPC stream, one per in-process caller) whose stacks
// every collection scans, over a small live heap, so with Go's default of
// 100 it collects often and spends 13–17% of its CPU there under load
// (GODEBUG=gctrace=1 on node bench). 400 lets the heap grow to five times
// the live data between collections — tens of megabytes for a busy node —
// and gives appends about a tenth more throughput in-process and over gRPC
// (docs/BENCHMARKS.md). GOGC (and GOMEMLIMIT) still override it.
const defaultGCPercent = 400

// tuneGC applies defaultGCPercent unless GOGC is set.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}
