package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/storetest"
)

func mustOpen(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(url)
	if err != nil {
		t.Fatalf("Open(%q): %v", url, err)
	}
	return s
}

func mustClose(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func sessionExists(t *testing.T, s *Store, id string) bool {
	t.Helper()
	_, err := s.Reader().GetSession(context.Background(), id)
	if err != nil && errs.CodeOf(err) != errs.NotFoundCode {
		t.Fatalf("GetSession: %v", err)
	}
	return err == nil
}

// The seed's race: many openers of one URL at once must share one handle
// and cause one open and one migration.
func TestConcurrentOpenSharesOneHandle(t *testing.T) {
	for _, url := range []string{filepath.Join(t.TempDir(), "db", "shared.db"), "memory:concurrent-open"} {
		t.Run(url, func(t *testing.T) {
			const n = 64
			before := Opens()
			stores := make([]*Store, n)
			errors := make([]error, n)
			storetest.AtOnce(n, func(i int) { stores[i], errors[i] = Open(url) })
			storetest.OneHandle(t, stores, errors)
			if got := Opens() - before; got != 1 {
				t.Fatalf("%d database opens, want 1", got)
			}
			s := stores[0]
			if s.MigrationRuns() != len(migrations) {
				t.Fatalf("migration runs %d, want %d", s.MigrationRuns(), len(migrations))
			}
			var version int
			if err := s.rdb.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != len(migrations) {
				t.Fatalf("user_version %d (%v), want %d", version, err, len(migrations))
			}
			id := storetest.CreateSession(t, s)
			// Every handle but the last may close; the database stays.
			for i := 0; i < n-1; i++ {
				mustClose(t, stores[i])
			}
			if !sessionExists(t, s, id) {
				t.Fatalf("data gone before the last Close")
			}
			mustClose(t, s)
			storetest.CheckClosed(t, s, id)
		})
	}
}

func TestMemoryNamesAreSeparateDatabases(t *testing.T) {
	a, b := mustOpen(t, "memory:names-a"), mustOpen(t, "memory:names-b")
	defer mustClose(t, b)
	id := storetest.CreateSession(t, a)
	if sessionExists(t, b, id) {
		t.Fatalf("memory:names-b sees memory:names-a's session")
	}
	a2 := mustOpen(t, "memory:names-a")
	if a2 != a || !sessionExists(t, a2, id) {
		t.Fatalf("a second Open of memory:names-a does not share its database")
	}
	mustClose(t, a2)
	mustClose(t, a)
	// The last Close dropped the in-memory database.
	a3 := mustOpen(t, "memory:names-a")
	defer mustClose(t, a3)
	if sessionExists(t, a3, id) {
		t.Fatalf("memory database survived its last Close")
	}
	if a3.MigrationRuns() != len(migrations) {
		t.Fatalf("fresh memory database: %d migrations", a3.MigrationRuns())
	}
}

func TestReopenFileKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reopen.db")
	s := mustOpen(t, path)
	id := storetest.CreateSession(t, s)
	mustClose(t, s)
	before := Opens()
	s = mustOpen(t, "file:"+path)
	defer mustClose(t, s)
	if Opens()-before != 1 {
		t.Fatalf("reopen did not open the database")
	}
	if s.MigrationRuns() != 0 {
		t.Fatalf("reopen ran %d migrations, want 0", s.MigrationRuns())
	}
	if !sessionExists(t, s, id) {
		t.Fatalf("session lost across reopen")
	}
	// The chain continues on the stored tail.
	storetest.CreateSession(t, s)
	all, err := s.Reader().ScanAudit(context.Background(), 0, 0)
	if err != nil || len(all) != 2 || all[1].Position != 2 || all[1].PrevHash != all[0].Hash {
		t.Fatalf("chain across reopen: %v %v", all, err)
	}
}

func TestURLNormalization(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s := mustOpen(t, "./sub/../x.db")
	defer mustClose(t, s)
	for _, url := range []string{"x.db", filepath.Join(dir, "x.db"), "file:" + filepath.Join(dir, "x.db"), "file:x.db?synchronous=FULL"} {
		o := mustOpen(t, url)
		if o != s {
			t.Fatalf("%q is another handle than ./sub/../x.db", url)
		}
		mustClose(t, o)
	}
	if want := "file:" + filepath.Join(dir, "x.db"); s.URL() != want {
		t.Fatalf("URL %q, want %q", s.URL(), want)
	}
	if _, err := Open("x.db?synchronous=normal"); errs.CodeOf(err) != errs.InvalidArgumentCode {
		t.Fatalf("conflicting synchronous: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := Open("x.db?cache_kib=512"); errs.CodeOf(err) != errs.InvalidArgumentCode {
		t.Fatalf("conflicting cache_kib: %v, want INVALID_ARGUMENT", err)
	}
	for _, bad := range []string{"", ":memory:", "memory:", "memory:a/b", "x.db?synchronous=off", "x.db?cache=shared", "file:", dir,
		"y.db?cache_kib=0", "y.db?cache_kib=63", "y.db?cache_kib=x", "y.db?cache_kib=2000&cache_kib=2000", "y.db?cache_kib=1048577"} {
		if _, err := Open(bad); errs.CodeOf(err) != errs.InvalidArgumentCode {
			t.Fatalf("Open(%q): %v, want INVALID_ARGUMENT", bad, err)
		}
	}
}

func TestSynchronousOption(t *testing.T) {
	for _, c := range []struct {
		url  string
		want int
	}{
		{filepath.Join(t.TempDir(), "full.db"), 2},
		{filepath.Join(t.TempDir(), "normal.db") + "?synchronous=normal", 1},
	} {
		s := mustOpen(t, c.url)
		var got int
		if err := s.wconn.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&got); err != nil || got != c.want {
			t.Fatalf("%s: writer synchronous %d (%v), want %d", c.url, got, err, c.want)
		}
		var mode string
		if err := s.rdb.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Fatalf("%s: reader journal_mode %q (%v)", c.url, mode, err)
		}
		var fk, timeout int
		if err := s.rdb.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
			t.Fatalf("reader foreign_keys %d (%v)", fk, err)
		}
		if err := s.rdb.QueryRow("PRAGMA busy_timeout").Scan(&timeout); err != nil || timeout != busyTimeoutMillis {
			t.Fatalf("reader busy_timeout %d (%v)", timeout, err)
		}
		mustClose(t, s)
	}
}

// cache_kib sets every connection's page cache (SQLite's cache_size, in
// KiB: negative), the default being SQLite's own.
func TestCacheOption(t *testing.T) {
	for _, c := range []struct {
		url  string
		want int
	}{
		{filepath.Join(t.TempDir(), "default.db"), -DefaultCacheKiB},
		{filepath.Join(t.TempDir(), "small.db") + "?cache_kib=256&synchronous=normal", -256},
	} {
		s := mustOpen(t, c.url)
		var got int
		if err := s.wconn.QueryRowContext(context.Background(), "PRAGMA cache_size").Scan(&got); err != nil || got != c.want {
			t.Fatalf("%s: writer cache_size %d (%v), want %d", c.url, got, err, c.want)
		}
		// Every reader: held all at once so that none is asked twice.
		ctx := context.Background()
		var conns []*sql.Conn
		for range readerConns {
			conn, err := s.rdb.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, conn)
		}
		for i, conn := range conns {
			err := conn.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&got)
			conn.Close()
			if err != nil || got != c.want {
				t.Fatalf("%s: reader %d cache_size %d (%v), want %d", c.url, i, got, err, c.want)
			}
		}
		// The checkpointer's one connection is its own for the Store's
		// life: its DSN carries the option.
		if dsn, want := s.loc.checkpointerDSN(), fmt.Sprintf("_cache_size=%d", c.want); !strings.Contains(dsn, want) {
			t.Fatalf("%s: checkpointer DSN %s lacks %s", c.url, dsn, want)
		}
		mustClose(t, s)
	}
}

// A failed open is not cached: the next Open tries again.
func TestFailedOpenIsRetried(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notadb.db")
	if err := os.WriteFile(path, []byte("this is not an SQLite database, not at all, no"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := Opens()
	if _, err := Open(path); err == nil {
		t.Fatalf("Open of a non-database succeeded")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, path)
	defer mustClose(t, s)
	if got := Opens() - before; got != 2 {
		t.Fatalf("%d opens, want 2 (the failure and the retry)", got)
	}
}

// Opens and Closes racing on one name never see two databases or a
// half-closed one: every handle returned by Open is fully usable.
func TestOpenCloseChurn(t *testing.T) {
	const workers, rounds = 8, 25
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				s, err := Open("memory:churn")
				if err != nil {
					t.Errorf("Open: %v", err)
					return
				}
				if _, err := s.Reader().ListSessions(context.Background(), persistence.SessionFilter{}); err != nil {
					t.Errorf("read on an open handle: %v", err)
				}
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if registry.Held("memory:churn") {
		t.Fatal("registry still holds memory:churn")
	}
}

// Two Stores on one file (the registry keys them apart: one path goes
// through a symlink) open it at the same time: the schema is still
// migrated once, because migration runs in an IMMEDIATE transaction that
// rechecks user_version, and both chain audit entries on one chain.
func TestMigrationOncePerDatabaseAcrossHandles(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	urls := []string{filepath.Join(dir, "two.db"), filepath.Join(link, "two.db")}
	stores := make([]*Store, 2)
	storetest.AtOnce(len(stores), func(i int) {
		s, err := Open(urls[i])
		if err != nil {
			t.Errorf("Open(%s): %v", urls[i], err)
			return
		}
		stores[i] = s
	})
	if t.Failed() {
		return
	}
	defer mustClose(t, stores[0])
	defer mustClose(t, stores[1])
	if stores[0] == stores[1] {
		t.Fatalf("the symlinked path gave the same handle; the test needs two")
	}
	if got := stores[0].MigrationRuns() + stores[1].MigrationRuns(); got != len(migrations) {
		t.Fatalf("%d migrations ran on one database, want %d", got, len(migrations))
	}
	for i := 0; i < 4; i++ {
		storetest.CreateSession(t, stores[i%2])
	}
	all, err := stores[0].Reader().ScanAudit(context.Background(), 0, 0)
	if err != nil || len(all) != 4 {
		t.Fatalf("ScanAudit: %d entries, %v", len(all), err)
	}
	prev := ""
	for i, e := range all {
		if e.Position != int64(i+1) || e.PrevHash != prev || e.Hash != persistence.AuditHash(prev, e) {
			t.Fatalf("entry %d breaks the chain: %v", i, e)
		}
		prev = e.Hash
	}
}
