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
//   - TestClusterEtcdMembership: three members on etcd (Debian's etcd
//     binary, started by the test), a fourth joins at runtime and takes
//     sessions, one leaves (SIGTERM) and one dies (SIGKILL); every session
//     is served again after each (probed; p99 at most 2 s), and the
//     checker's verdict is clean. Then etcd dies: /readyz 503 saying why, new
//     activations refused UNAVAILABLE, held sessions served; etcd back:
//     ready and activating again.
//   - TestClusterEtcdRollingRestart: three etcd members, authentication on
//     (TLS with client certificates, an identities file, the load as a
//     tenant) and mutual TLS between members, each
//     restarted in turn under load; every session served again after each
//     leave and rejoin, the verdict clean.
//   - TestClusterEtcdTLSAndCredentials: a member reaches etcd over TLS with
//     a client certificate and a password; a wrong password refuses to start.
//   - TestClusterDoubleActivation: two one-member clusters on one database
//     both activate the same session and plan; store fencing leaves exactly
//     one activation able to write at a time.
//
// They need a PostgreSQL server: AGENTSTATE_TEST_POSTGRES names a DSN of a
// role that may create databases (`eval "$(bash .ci/postgres.sh)"` starts
// one). Each test creates a database of its own and drops it at the end.
// Without the variable the tests skip, or fail when CI is set; so do the
// etcd tests without an etcd binary.
// docs/OPERATIONS.md ("Cluster", "Measured") has the commands and figures.
package cluster
