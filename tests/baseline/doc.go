// Package baseline holds faithful Go ports of the four upstream Python
// designs whose races are described in the seed bug reports (summarised
// in docs/SEEDS.md). It exists only so that tests/seeds can run the same
// stress test against the old design and against agentstate and show that
// the test catches the bug in the former and finds none in the latter. No
// production code may import it.
//
// Each port keeps the upstream structure that makes the race possible and
// nothing more:
//
//   - SessionService (seed 000, #7326): append_message reads
//     count_for_session, then inserts the message with sequence=count, as
//     two separate statements on a pooled SQLite engine whose
//     (session_id, sequence) index is not unique.
//   - AuditService (seed 002, #7325): one ORM session (one connection, one
//     pending list) shared by the background writer goroutine and every
//     caller of list/count/get/prune.
//   - ErrorRecoveryService (seed 003, #7333): _get_or_create_history is an
//     unsynchronized check-then-set on the plan-history map.
//   - EngineCache (seed 004, #7566): UnitOfWork.engine is an unsynchronized
//     check-then-set on the global MEMORY_ENGINES map.
//
// Porting rule. CPython's GIL makes each single dict or list operation
// atomic, and the sqlite3 module holds the connection's mutex for each
// single statement; nothing makes a sequence of them atomic. The ports keep
// exactly that granularity: every single map, slice or statement operation
// runs under a mutex (or the connection's own lock), and the mutex is
// released between the steps of a sequence. The ports therefore have the
// seeds' logical races (time-of-check to time-of-use) without a Go memory
// race, so they run under `go test -race`.
//
// Yield points. Upstream threads interleave wherever CPython switches
// threads: at every sqlite3 call (pysqlite releases the GIL around each)
// and inside Python code such as a constructor. Go does not reschedule on a
// cgo return, so the ports yield (releaseGIL, runtime.Gosched) at those
// points, each one commented with the Python work it stands for. They never
// open a window the Python code does not have; without them a machine with
// one free core would hide the races.
package baseline
