package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// sampleInterval is how often the sampler reads pg_stat_activity.
const sampleInterval = 5 * time.Millisecond

// sampler watches the backends of one database during a timed window:
// how many were busy and what each was waiting on, and the database's
// commits over the window.
type sampler struct {
	conn     *pgx.Conn
	stopped  chan struct{}
	finished chan error
	commits0 int64
	wal0     string
	// queries counts the sampler's own statements, each a transaction
	// pg_stat_database counts, to take them off the commits.
	queries int64
	samples samples
}

type samples struct {
	// waits counts busy backends seen per wait event ("Lock:tuple", ...,
	// "cpu" for one running).
	waits   map[string]int
	busy    int
	locked  int
	commits int64
	// walBytes is the WAL the server wrote in the window (the whole
	// server's: run nothing else on it while measuring).
	walBytes int64
}

// lockShare is the share of busy backend samples waiting on a lock.
func (s samples) lockShare() float64 {
	if s.busy == 0 {
		return 0
	}
	return float64(s.locked) / float64(s.busy)
}

// The database's non-idle backends other than the sampler, with what
// they wait on. A backend "idle in transaction" between statements is
// not waiting on the server, so only active ones count.
const sampleSQL = `SELECT coalesce(wait_event_type, ''), coalesce(wait_event, '') FROM pg_stat_activity
	WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'`

const commitsSQL = `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`

func startSampler(ctx context.Context, dsn string) (*sampler, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: sampler: %w", err)
	}
	s := &sampler{conn: conn, stopped: make(chan struct{}), finished: make(chan error, 1),
		samples: samples{waits: map[string]int{}}}
	if s.commits0, err = s.readCommits(ctx); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&s.wal0); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	go func() { s.finished <- s.run(ctx) }()
	return s, nil
}

// readCommits reads the database's commits so far, with the statistics
// snapshot cleared first so that the figure is current.
func (s *sampler) readCommits(ctx context.Context) (int64, error) {
	if _, err := s.conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return 0, err
	}
	var n int64
	err := s.conn.QueryRow(ctx, commitsSQL).Scan(&n)
	return n, err
}

func (s *sampler) run(ctx context.Context) error {
	tick := time.NewTicker(sampleInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stopped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		s.queries++
		rows, err := s.conn.Query(ctx, sampleSQL)
		if err != nil {
			return err
		}
		var typ, ev string
		_, err = pgx.ForEachRow(rows, []any{&typ, &ev}, func() error {
			s.samples.busy++
			switch typ {
			case "":
				s.samples.waits["cpu"]++
			case "Lock":
				s.samples.locked++
				fallthrough
			default:
				s.samples.waits[typ+":"+ev]++
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
}

// stop ends the sampling and returns what it saw. Statistics reach
// pg_stat_database when a backend reports them (within about a second of
// its commit, PostgreSQL 15), so the commits are read after a short
// settle.
func (s *sampler) stop(ctx context.Context) (samples, error) {
	close(s.stopped)
	err := <-s.finished
	defer s.conn.Close(context.WithoutCancel(ctx))
	// Waiting for the server's statistics interval, not synchronization
	// with anything of ours.
	time.Sleep(1500 * time.Millisecond)
	var werr error
	if err == nil {
		werr = s.conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint", s.wal0).Scan(&s.samples.walBytes)
	}
	n, cerr := s.readCommits(ctx)
	// Less the sampler's statements and the three of its first reads.
	s.samples.commits = n - s.commits0 - s.queries - 3
	cerr = errors.Join(werr, cerr)
	return s.samples, errors.Join(err, cerr)
}
