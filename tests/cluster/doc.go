// Package cluster proves the multi-process cluster from the outside: three
// `node serve --cluster` processes on loopback share one PostgreSQL
// database, the crash checker's load (tests/checker) is spread over their
// gRPC ports, and random members are SIGKILLed and restarted while it runs.
// The verdict is the checker's: no acknowledged message lost, none stored
// twice, no gap in any session's sequences.
//
// The tests live in this package's _test files:
//
//   - TestClusterCrashLoop: 3 members, ≥ 10 SIGKILLs of random members,
//     failover measured with Failover (from each kill to the first
//     acknowledged append of every session that failed after it).
//   - TestClusterLogsGoThroughTheNode: two members start, serve and stop;
//     everything they print is their JSON log, without an ERROR.
//   - TestClusterDoubleActivation: two one-member clusters on one database
//     both activate the same session and plan; store fencing leaves exactly
//     one activation able to write at a time.
//
// They need a PostgreSQL server: AGENTSTATE_TEST_POSTGRES names a DSN of a
// role that may create databases (`eval "$(bash .ci/postgres.sh)"` starts
// one). Each test creates a database of its own and drops it at the end.
// Without the variable the tests skip, or fail when CI is set.
// docs/OPERATIONS.md ("Cluster", "Measured") has the commands and figures.
package cluster
