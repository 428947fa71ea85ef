// Command adk runs node bench's append workload against adk-go's database
// session service (google.golang.org/adk/session/database) on SQLite, and
// against agentstate in the same process, and reports throughput, latency,
// completeness, ordering and failures in node bench's table format.
//
//	cd tests/adk && go run . -sessions 64 -clients 64 -appends 65536
//	cd tests/adk && go run . -sessions 1 -clients 16 -json > adk.json
//
// It is its own module so that adk's dependency tree (genai, cloud
// libraries, gorm) stays out of agentstate's go.mod; the root module's
// ./... does not include it and `make test` does not run it.
//
// The workload, the driver and the verification are node bench's own
// (package node/bench, imported, not copied): Sessions × Clients clients
// (Clients per session), each appending its share of Appends one message
// at a time; after the run every session is read back, every acknowledged
// message must be stored, and a message answered before another was sent
// must be stored before it. adk has no sequence numbers; its order is the
// read-back order (events by timestamp), so "dense" holds by construction
// there. adkTarget implements bench.Target, and bench.PerClient for the
// handle each adk client holds.
//
// Modes:
//
//   - adk: every client holds its own session handle, as every concurrent
//     runner invocation does. adk's AppendEvent refuses a handle older than
//     the stored session ("stale session"); the client then re-reads the
//     session and retries with the same event id (counted as a retry).
//   - adk-serialized: one handle per session and an application mutex
//     around AppendEvent: what an application must do to use one adk
//     session from several goroutines without stale-session failures
//     (sharing a handle unguarded is a data race in adk).
//   - inprocess: agentstate's sessions service, in process, on its own
//     SQLite file with the same durability.
//
// adk's SQLite: gorm.io/driver/sqlite (mattn/go-sqlite3) with
// _journal_mode=WAL, _synchronous=FULL (or NORMAL with -durability
// normal), _busy_timeout=5000 and _txlock=immediate — the last two give
// adk its best case: without them concurrent transactions fail at once
// with "database is locked" instead of waiting.
package main
