// Package bench is the engine behind `node bench`: it drives the standard
// append workload against agentstate (in-process or over gRPC), against the
// seed baseline (the original count-then-insert design) and against the raw
// SQLite ceiling, and verifies afterwards that what was acknowledged is
// stored, dense and in order.
//
// The workload. Sessions × Clients goroutines ("clients"); client (s, c)
// appends its share of Appends (the total) to session s, one message at a
// time, each next append only after the previous one was answered. So
// Clients is the number of concurrent writers per session. Afterwards every
// session is read back: each acknowledged message must be there, at the
// sequence it was answered with, sequences dense from 0, and in
// acknowledgement order — a message answered before another was sent is
// stored before it (so each client's own messages are in its order). Every
// message carries a client-made ULID, which makes retries
// idempotent and lets the verifier find each acknowledged message again.
//
// Using it:
//
//	res, err := bench.Run(ctx, bench.Config{Mode: bench.ModeInProcess, Sessions: 64, Clients: 64, Appends: 65536})
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
