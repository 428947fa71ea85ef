package sqlite

import (
	"context"
	"fmt"
	"os"
)

// checkpointBusyMillis bounds how long a forced checkpoint waits for
// readers to leave the WAL before it gives up until the next commit.
const checkpointBusyMillis = 20

// maybeCheckpoint bounds the WAL of a file database. SQLite's automatic
// PASSIVE checkpoints copy pages back but cannot restart the WAL while
// readers use it, so a busy database's WAL can keep growing. After a
// commit that leaves the WAL above walLimit, it runs a TRUNCATE checkpoint
// that waits at most checkpointBusyMillis; if readers still hold the WAL,
// it gives up and tries again after the next commit. Readers never hold a
// snapshot across calls, so it soon succeeds. Called with wmu held.
func (s *Store) maybeCheckpoint() {
	if s.walPath == "" {
		return
	}
	st, err := os.Stat(s.walPath)
	if err != nil || st.Size() <= s.walLimit {
		return
	}
	ctx := context.Background()
	if _, err := s.wconn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", checkpointBusyMillis)); err != nil {
		return
	}
	var busy, logPages, done int64
	err = s.wconn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &done)
	if err == nil && busy == 0 {
		s.checkpoints.Add(1)
	}
	// Restoring the timeout cannot fail on a healthy connection; if it
	// does, the next Apply reports the connection's failure.
	_, _ = s.wconn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeoutMillis))
}
