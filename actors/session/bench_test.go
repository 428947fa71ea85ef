package session_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	"github.com/agentstate/agentstate/actors/writer"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Append throughput and latency, all on a file database in WAL mode with
// synchronous=FULL (every commit fsyncs), in-process:
//
//   - agentstate: the façade → sessions directory → session actor → audit
//     actor (group commit) path, S sessions × C senders per session (S·C
//     sender goroutines; S=64×C=64 is 4,096 concurrent senders, S=1×C=16 is
//     16 senders on one session: the reading of C);
//   - baseline: the seed's design (seeds/000) ported as it was: a pooled
//     database/sql engine, and per append get-session, COUNT(*), INSERT
//     with sequence = count, UPDATE updated_at, each its own auto-commit
//     statement, on the same tables but with the seed's non-unique
//     (session_id, sequence) index. It also reports how many sequences it
//     stored twice (dup-seqs);
//   - raw-ceiling: the same rows inserted by one goroutine with one
//     prepared statement in 1000-row transactions, nothing else.
//
// Each b.N iteration makes a fixed number of appends (at least one per
// sender), so -benchtime=1x is quick. Metrics: appends/s, and p50/p99
// latency of one append in µs.

const (
	benchAppends         = 16384 // per iteration: agentstate, raw ceiling
	benchBaselineAppends = 1024  // per iteration: the baseline is ~20x slower
	benchContentBytes    = 200
)

var benchContent = strings.Repeat("c", benchContentBytes)

// shape is a workload: sessions × senders per session.
type shape struct{ sessions, perSession int }

// shapes are the two workloads and, for comparison with earlier
// figures, 64 senders in all (one per session).
var shapes = []shape{{64, 64}, {1, 16}, {64, 1}}

func (s shape) String() string { return fmt.Sprintf("S=%dxC=%d", s.sessions, s.perSession) }

func (s shape) senders() int { return s.sessions * s.perSession }

// appends is total rounded down to a multiple of the senders, and at least
// one append per sender.
func (s shape) appends(total int) int { return max(total/s.senders(), 1) * s.senders() }

// drive runs sh.appends(total) appends per iteration from sh.senders()
// goroutines, each with one append outstanding; sender g appends to
// session g mod S. It reports the metrics.
func drive(b *testing.B, sh shape, total int, appendOne func(ctx context.Context, session int) error) {
	senders := sh.senders()
	per := sh.appends(total) / senders
	lat := make([][]time.Duration, senders)
	for g := range lat {
		lat[g] = make([]time.Duration, 0, per*b.N)
	}
	ctx := context.Background()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		var wg sync.WaitGroup
		errc := make(chan error, senders)
		for g := 0; g < senders; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < per; i++ {
					t0 := time.Now()
					if err := appendOne(ctx, g%sh.sessions); err != nil {
						errc <- err
						return
					}
					lat[g] = append(lat[g], time.Since(t0))
				}
			}(g)
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRate(b, per*senders*b.N)
	reportCPU(b, cpu0, per*senders*b.N)
	reportLatency(b, slices.Concat(lat...))
}

// cpuTime is the process's CPU time so far (user + system, all threads):
// steadier than rates on a shared machine.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, since time.Duration, appends int) {
	b.ReportMetric(float64((cpuTime(b)-since).Microseconds())/float64(appends), "cpu-µs/append")
}

func reportRate(b *testing.B, appends int) {
	b.ReportMetric(float64(appends)/b.Elapsed().Seconds(), "appends/s")
	b.ReportMetric(0, "ns/op") // per-iteration time says nothing here
}

func reportLatency(b *testing.B, all []time.Duration) {
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[int(p*float64(len(all)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

func BenchmarkAppend(b *testing.B) {
	for _, sh := range shapes {
		b.Run("agentstate/"+sh.String(), func(b *testing.B) {
			benchAgentstate(b, sh, filepath.Join(b.TempDir(), "bench.db"))
		})
	}
	// The same path without a disk: what the actors and SQLite cost
	// when no commit waits for an fsync.
	for _, sh := range shapes {
		b.Run("agentstate-memory/"+sh.String(), func(b *testing.B) { benchAgentstate(b, sh, memURL(b)) })
	}
	for _, sh := range shapes {
		b.Run("baseline/"+sh.String(), func(b *testing.B) { benchBaseline(b, sh) })
	}
	b.Run("raw-ceiling/S=64", func(b *testing.B) { benchRaw(b, 64) })
}

// txStats observes the writer's transactions, to tell how much
// group commit the load achieved.
type txStats struct {
	mu       sync.Mutex
	txs      int
	commands int
	dur      time.Duration
}

func (o *txStats) BatchCommitted(commands, _ int, dur time.Duration, _ error) {
	o.mu.Lock()
	o.txs++
	o.commands += commands
	o.dur += dur
	o.mu.Unlock()
}
func (o *txStats) AsyncRetried(int, error) {}
func (o *txStats) AsyncLost(int, error)    {}

func (o *txStats) report(b *testing.B, appends int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.txs > 0 {
		b.ReportMetric(float64(o.commands)/float64(o.txs), "cmds/tx")
		b.ReportMetric(float64(appends)/float64(o.txs), "appends/tx")
		b.ReportMetric(float64(o.dur.Microseconds())/float64(o.txs), "µs/tx")
	}
}

func benchAgentstate(b *testing.B, sh shape, url string) {
	stats := &txStats{}
	n := startNodeWith(b, url, writer.Config{Observer: stats}, session.Config{}, nil)
	sessions := make([]string, sh.sessions)
	for i := range sessions {
		sessions[i] = n.create(b, "bench")
	}
	stats.mu.Lock()
	stats.txs, stats.commands, stats.dur = 0, 0, 0 // count only the timed appends
	stats.mu.Unlock()
	drive(b, sh, benchAppends, func(ctx context.Context, s int) error {
		_, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: sessions[s], Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_USER, Content: benchContent},
		}})
		return err
	})
	stats.report(b, sh.appends(benchAppends)*b.N)
	var stored int64
	for _, id := range sessions {
		stored += n.get(b, id).GetMessageCount()
	}
	if want := int64(sh.appends(benchAppends) * b.N); stored != want {
		b.Fatalf("stored %d messages, want %d", stored, want)
	}
}

// baselineSchema is agentstate's session tables with the seed's index: the
// (session_id, sequence) index is not unique, so duplicate sequences are
// stored rather than refused (#7326).
const baselineSchema = `
CREATE TABLE sessions (
	session_id    TEXT PRIMARY KEY,
	actor_name    TEXT NOT NULL,
	namespace     TEXT NOT NULL,
	automation    TEXT NOT NULL,
	metadata_json TEXT NOT NULL,
	state         INTEGER NOT NULL,
	input_tokens  INTEGER NOT NULL DEFAULT 0,
	output_tokens INTEGER NOT NULL DEFAULT 0,
	cost          REAL NOT NULL DEFAULT 0,
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	closed_at     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE session_messages (
	id            INTEGER PRIMARY KEY,
	session_id    TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
	sequence      INTEGER NOT NULL,
	message_id    TEXT NOT NULL,
	role          INTEGER NOT NULL,
	content       TEXT NOT NULL,
	metadata_json TEXT NOT NULL,
	created_at    INTEGER NOT NULL
);
CREATE INDEX session_messages_by_sequence ON session_messages(session_id, sequence);
`

// seedStore is PersistentSessionService as the seed describes it, on a
// pooled engine (SQLAlchemy's default QueuePool: 5 + 10 overflow).
type seedStore struct{ db *sql.DB }

func openSeedStore(b *testing.B) *seedStore {
	path := filepath.Join(b.TempDir(), "baseline.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=30000&_foreign_keys=1")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(15)
	db.SetMaxIdleConns(15)
	b.Cleanup(func() { db.Close() })
	if _, err := db.Exec(baselineSchema); err != nil {
		b.Fatal(err)
	}
	return &seedStore{db: db}
}

func (s *seedStore) create(ctx context.Context) (string, error) {
	id, now := ids.New(), time.Now().UnixNano()
	_, err := s.db.ExecContext(ctx, `INSERT INTO sessions (session_id, actor_name, namespace, automation, metadata_json,
		state, created_at, updated_at) VALUES (?, 'bench', 'local', '', '{}', 1, ?, ?)`, id, now, now)
	return id, err
}

// appendMessage is the seed's append_message, step by step.
func (s *seedStore) appendMessage(ctx context.Context, sessionID, content string) error {
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE session_id = ?`, sessionID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("session %s not found", sessionID)
	}
	if err != nil {
		return err
	}
	var count int64
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM session_messages WHERE session_id = ?`, sessionID).Scan(&count); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO session_messages (session_id, sequence, message_id, role, content,
		metadata_json, created_at) VALUES (?, ?, ?, 1, ?, '{}', ?)`, sessionID, count, ids.New(), content, now); err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `UPDATE sessions SET updated_at = ? WHERE session_id = ?`, now, sessionID)
	return err
}

// duplicates counts stored messages whose (session, sequence) is taken by
// an earlier one.
func (s *seedStore) duplicates(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(c - 1), 0) FROM
		(SELECT COUNT(*) AS c FROM session_messages GROUP BY session_id, sequence HAVING c > 1)`).Scan(&n)
	return n, err
}

func benchBaseline(b *testing.B, sh shape) {
	s := openSeedStore(b)
	ctx := context.Background()
	sessions := make([]string, sh.sessions)
	for i := range sessions {
		var err error
		if sessions[i], err = s.create(ctx); err != nil {
			b.Fatal(err)
		}
	}
	drive(b, sh, benchBaselineAppends, func(ctx context.Context, i int) error {
		return s.appendMessage(ctx, sessions[i], benchContent)
	})
	dups, err := s.duplicates(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(dups), "dup-seqs")
}

// benchRaw inserts the rows agentstate stores for benchAppends appends over
// sessions sessions, with agentstate's own schema (made by sqlite.Open),
// from one goroutine in 1000-row transactions: the disk's ceiling for
// these rows with one fsync per 1000.
func benchRaw(b *testing.B, sessions int) {
	path := filepath.Join(b.TempDir(), "raw.db")
	ids := rawSessions(b, path, sessions)
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=30000")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	next := make([]int64, sessions)
	const perTx = 1000
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		for done := 0; done < benchAppends; {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			// 1000 rows over the sessions are several per session, which the
			// store writes settled into the per-session index at once
			// (indexed = 1; session_messages is the view over message_rows).
			st, err := tx.PrepareContext(ctx, `INSERT INTO message_rows (session_id, sequence, message_id, role, content,
				metadata_json, created_at, indexed) VALUES (?, ?, ?, 1, ?, '{}', ?, 1)`)
			if err != nil {
				b.Fatal(err)
			}
			for k := 0; k < perTx && done < benchAppends; k++ {
				s := done % sessions
				if _, err := st.ExecContext(ctx, ids[s], next[s], newID(), benchContent, time.Now().UnixNano()); err != nil {
					b.Fatal(err)
				}
				next[s]++
				done++
			}
			st.Close()
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	reportRate(b, benchAppends*b.N)
	reportCPU(b, cpu0, benchAppends*b.N)
}

var newID = ids.New

// rawSessions makes the database with agentstate's schema and sessions.
func rawSessions(b *testing.B, path string, n int) []string {
	st, err := sqlite.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	w, err := st.Writer()
	if err != nil {
		b.Fatal(err)
	}
	defer w.Release()
	out := make([]string, n)
	cmds := make([]persistence.Command, n)
	now := timestamppb.Now()
	for i := range out {
		out[i] = newID()
		cmds[i] = &persistence.CreateSession{Session: &sessionv1.Session{SessionId: out[i], ActorName: "bench", Namespace: "local", CreatedAt: now, UpdatedAt: now}}
	}
	if _, err := w.Apply(context.Background(), cmds); err != nil {
		b.Fatal(err)
	}
	return out
}
