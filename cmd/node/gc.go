package main

import (
	"os"
	"runtime/debug"

	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/node/appendstream"
	"github.com/agentstate/agentstate/node/feedstream"
	"github.com/agentstate/agentstate/node/server"
)

// defaultGCPercent is the node's garbage-collection target when the GOGC
// environment variable does not set one. A node runs thousands of
// goroutines (one per gRPC stream, one per in-process caller) whose stacks
// every collection scans, over a small live heap, so with Go's default of
// 100 it collects often and spends 13–17% of its CPU there under load
// (GODEBUG=gctrace=1 on node bench). 400 lets the heap grow to five times
// the live data between collections — tens of megabytes for a busy node —
// and gives appends about a tenth more throughput in-process and over gRPC
// (docs/bench/HISTORY.md). GOGC (and GOMEMLIMIT) still override it.
const defaultGCPercent = 400

// tuneGC applies defaultGCPercent unless GOGC is set.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// baseMemory is what a serving node holds besides the requests its byte
// budgets admit: the runtime, the database's and the transport's buffers,
// the frames of requests still arriving, the goroutines of the streams.
const baseMemory = 192 << 20

// memoryLimit is the soft memory limit (Go's GOMEMLIMIT) node serve sets
// when the environment sets none: baseMemory plus twice the byte budgets
// that bound the requests in flight (the writer's backlog, the unary
// requests', the AppendBatches streams') and the feed tails' events. The
// budgets bound the live heap;
// with a GC target of 400 and no limit, the garbage between collections
// would be four times that (issue 15's soak: a live heap of 210 MiB grew
// past a 1 GiB address-space allowance and the node died). Twice the
// budgets leaves the collector room above the live heap, so it does not
// run continuously: with the defaults, 576 MiB (512 MiB before the feeds'
// budget), where every attack of the soak at once peaked at a live heap of
// 255 MiB.
func memoryLimit(f *server.Config) int64 {
	orDefault := func(v, def int64) int64 {
		if v > 0 {
			return v
		}
		return def
	}
	return baseMemory + 2*(orDefault(f.BacklogBytes, writer.DefaultBacklogBytes)+
		orDefault(f.GRPCRequestBytes, server.DefaultGRPCRequestBytes)+
		orDefault(f.StreamTotalBytes, appendstream.DefaultTotalBytes)+
		orDefault(f.FeedBytes, feedstream.DefaultTotalBytes))
}

// limitMemory sets memoryLimit(f) as the soft memory limit unless
// GOMEMLIMIT is in the environment (which also takes "off"), and returns
// the limit it set (0: none).
func limitMemory(f *server.Config) int64 {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return 0
	}
	l := memoryLimit(f)
	debug.SetMemoryLimit(l)
	return l
}
