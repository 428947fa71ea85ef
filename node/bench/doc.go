// Package bench is the engine behind `node bench`: it drives the standard
// append workload against agentstate (in-process or over gRPC), against the
// seed baseline (the original count-then-insert design) and against the raw
// SQLite ceiling, and verifies afterwards that what was acknowledged is
// stored, dense and in order.
//
// The workload. Callers goroutines (C, callers in total), each a closed
// loop: one message at a time, each next append only after the previous
// one was answered; caller c's j-th append is append i = c + j·C of the run
// and goes to session i mod S (Sessions). The named Workloads are issue
// 17's: W1 (S=64, C=64), W2 (S=1, C=16), W3 (S=1024, C=256), W4 (S=10,000,
// C=64, sessions passivated when idle, so most appends activate theirs) and
// 4096 (S=64, C=4,096: 64 callers on each session, what older reports
// called "S=64×C=64", counting callers per session). Afterwards every
// session is read back: each acknowledged message must be there, at the
// sequence it was answered with, sequences dense from 0, and in
// acknowledgement order — a message answered before another was sent is
// stored before it (so each client's own messages are in its order). Every
// message carries a client-made ULID, which makes retries
// idempotent and lets the verifier find each acknowledged message again.
//
// Using it:
//
//	res, err := bench.Run(ctx, bench.Config{Mode: bench.ModeInProcess, Sessions: 64, Callers: 64, Appends: 65536})
//	bench.WriteTable(os.Stdout, []bench.Result{res})
//
// Another system can be measured with the same driver and verifier by
// implementing Target (and PerClient when each client holds a handle of its
// own) and calling Drive; tests/adk does that for adk-go's
// database session service.
//
// The timed window is from the release of the first client to the last
// answer; creating sessions before it and verifying after it are not timed.
package bench
