package sqlite

import (
	"context"
	"fmt"
)

// Test hooks. They run on the writer connection under the writer's mutex,
// so they never interleave with an Apply. They exist to inject storage
// faults in tests of this package and of the actors above it.

// SetMaxPageCount sets PRAGMA max_page_count on the writer connection. A
// transaction that would grow the database beyond it fails with
// SQLITE_FULL, which Apply reports as RESOURCE_EXHAUSTED: a full disk.
// SQLite never sets the limit below the current size; use PageCount to
// pin the database at its size. Raise the limit to end the fault.
func (s *Store) SetMaxPageCount(n int64) error {
	if err := s.wmu.LockOpen(s.loc.key); err != nil {
		return err
	}
	defer s.wmu.Unlock()
	_, err := s.wconn.ExecContext(context.Background(), fmt.Sprintf("PRAGMA max_page_count = %d", n))
	return storeErr("set max_page_count", err)
}

// PageCount returns the database's current size in pages.
func (s *Store) PageCount() (int64, error) {
	if err := s.wmu.LockOpen(s.loc.key); err != nil {
		return 0, err
	}
	defer s.wmu.Unlock()
	var n int64
	err := s.wconn.QueryRowContext(context.Background(), "PRAGMA page_count").Scan(&n)
	return n, storeErr("page_count", err)
}

// SetReadOnly switches the writer connection to query_only (on) or back.
// While on, every write fails with SQLITE_READONLY, which Apply reports as
// UNAVAILABLE: a database file that became read-only.
func (s *Store) SetReadOnly(on bool) error {
	if err := s.wmu.LockOpen(s.loc.key); err != nil {
		return err
	}
	defer s.wmu.Unlock()
	_, err := s.wconn.ExecContext(context.Background(), fmt.Sprintf("PRAGMA query_only = %d", boolInt(on)))
	return storeErr("set query_only", err)
}
