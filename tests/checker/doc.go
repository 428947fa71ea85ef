// Package checker proves, from the outside, that a node keeps its
// promises while it is killed and while its disk fails: every
// acknowledged write survives, exactly once, in acknowledged order.
//
// It drives a `node serve` subprocess over gRPC only, as any client
// would:
//
//   - Node builds (BuildNode), starts, SIGKILLs and restarts the binary on
//     one database file and fixed addresses, waiting for /readyz.
//   - Load runs C sequential clients over S sessions: appends of 1..3
//     messages with client-chosen message ids, plan errors with
//     client-chosen record ids, synchronous audit entries with
//     client-chosen event ids and replays of acknowledged turns. A failed
//     request is retried with the same ids until it is acknowledged.
//   - Ledger records every acknowledgement exactly as answered.
//   - Observe reads everything back (Get, paged ListMessages, History,
//     audit Get, List and Verify); Check compares ledger and observation
//     and returns a Report whose violation counters (Lost, DupAppends,
//     DupPlanRecords, DupAudit, Gaps, Changed, Reordered, Phantom, BadAcks,
//     ChainBroken, Rejected) must all be zero.
//
// CrashLoop and FaultRun put these together:
//
//	n, _ := checker.StartNode(ctx, checker.NodeConfig{Binary: bin, Dir: dir})
//	defer n.Close()
//	conn, _ := n.Dial()
//	r, err := checker.CrashLoop(ctx, n, conn, checker.CrashConfig{Kills: 5, Seed: seed})
//	// err: the run could not be carried out; r.Err(): the node broke a promise.
//
// Check is pure and unit-tested on synthetic ledgers, so each violation
// is shown to be detectable. docs/CHECKER.md has the commands, the sizes
// of the CI and the long run, and their figures.
package checker
