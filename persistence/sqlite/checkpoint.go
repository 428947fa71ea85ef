package sqlite

import (
	"context"
	"fmt"
	"os"
)

const (
	// softCheckpointMillis bounds how long a forced checkpoint waits for
	// readers once the WAL passes walLimit; if they still hold it, the
	// writer moves on and tries again after its next commit.
	softCheckpointMillis = 20
	// hardCheckpointMillis is the wait once the WAL passes
	// hardWALFactor*walLimit: then the writer stalls for up to this long
	// rather than let the WAL grow further.
	hardCheckpointMillis = 2000
	hardWALFactor        = 4
)

// maybeCheckpoint wakes the checkpointer after a commit (checkpointer.go)
// and bounds the WAL of a file database.
//
// The checkpointer's checkpoints copy pages back into the database but
// cannot restart the WAL while readers use it, so under steady reads the
// WAL keeps growing. So after a commit that leaves the WAL
// above walLimit, the writer runs a TRUNCATE checkpoint, which waits for the
// readers that still need the WAL (new readers read the database file once
// it is fully copied back) and then empties the file. Readers never hold a
// snapshot across calls, so the wait is at most one read's length. The wait
// is short above walLimit (give up, retry after the next commit) and long
// above hardWALFactor*walLimit, which bounds the WAL at about that size
// plus one transaction. Called with wmu held, after every commit.
func (s *Store) maybeCheckpoint() {
	if s.walPath == "" {
		return
	}
	s.ckpt.poke()
	st, err := os.Stat(s.walPath)
	if err != nil || st.Size() <= s.walLimit {
		return
	}
	wait := softCheckpointMillis
	if st.Size() > hardWALFactor*s.walLimit {
		wait = hardCheckpointMillis
	}
	ctx := context.Background()
	if _, err := s.wconn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", wait)); err != nil {
		return
	}
	// ckmu: the checkpointer's pass, if one runs, holds SQLite's
	// checkpoint lock, for which SQLite does not wait; this waits for it.
	s.ckmu.Lock()
	defer s.ckmu.Unlock()
	var busy, logPages, done int64
	err = s.wconn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &done)
	if err == nil && busy == 0 {
		s.checkpoints.Add(1)
	}
	// Restoring the timeout cannot fail on a healthy connection; if it
	// does, the next Apply reports the connection's failure.
	_, _ = s.wconn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeoutMillis))
}
