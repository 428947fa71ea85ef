package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence/storetest"
	"github.com/jackc/pgx/v5"
)

// Many openers of one DSN at once share one handle, one open and one
// migration; the last Close closes it.
func TestConcurrentOpenSharesOneHandle(t *testing.T) {
	dsn := freshDSN(t)
	const n = 32
	before := Opens()
	stores := make([]*Store, n)
	errors := make([]error, n)
	storetest.AtOnce(n, func(i int) { stores[i], errors[i] = Open(context.Background(), dsn) })
	storetest.OneHandle(t, stores, errors)
	if got := Opens() - before; got != 1 {
		t.Fatalf("%d opens, want 1", got)
	}
	s := stores[0]
	if s.MigrationRuns() != len(migrations) {
		t.Fatalf("migration runs %d, want %d", s.MigrationRuns(), len(migrations))
	}
	id := storetest.CreateSession(t, s)
	for i := 0; i < n-1; i++ {
		if err := stores[i].Close(); err != nil {
			t.Fatalf("Close %d: %v", i, err)
		}
	}
	if _, err := s.Reader().GetSession(context.Background(), id); err != nil {
		t.Fatalf("read before the last Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("last Close: %v", err)
	}
	storetest.CheckClosed(t, s, id)
	// Reopening opens afresh, and finds the schema current and the data.
	again := mustOpen(t, dsn)
	if again == s || again.MigrationRuns() != 0 {
		t.Fatalf("reopen: same handle %v, migration runs %d", again == s, again.MigrationRuns())
	}
	if _, err := again.Reader().GetSession(context.Background(), id); err != nil {
		t.Fatalf("read after reopening: %v", err)
	}
}

// Separate processes (Unshared Stores, each with its own connections)
// opening one new schema at once migrate it exactly once.
func TestConcurrentUnsharedOpensMigrateOnce(t *testing.T) {
	dsn := freshDSN(t)
	const n = 12
	stores := make([]*Store, n)
	errors := make([]error, n)
	storetest.AtOnce(n, func(i int) { stores[i], errors[i] = Open(context.Background(), dsn, Unshared()) })
	runs := 0
	for i, s := range stores {
		if errors[i] != nil {
			t.Fatalf("Open %d: %v", i, errors[i])
		}
		defer s.Close()
		for _, o := range stores[:i] {
			if o == s {
				t.Fatalf("unshared Opens returned one handle twice")
			}
		}
		runs += s.MigrationRuns()
	}
	if runs != len(migrations) {
		t.Fatalf("%d migrations applied in all, want %d (each once)", runs, len(migrations))
	}
	var versions, tables int
	err := server.admin.QueryRow(context.Background(), `SELECT
		(SELECT COUNT(*) FROM `+schemaOf(dsn)+`.schema_version),
		(SELECT COUNT(*) FROM pg_tables WHERE schemaname = $1)`, schemaOf(dsn)).Scan(&versions, &tables)
	if err != nil || versions != len(migrations) {
		t.Fatalf("schema_version has %d rows (%v), want %d", versions, err, len(migrations))
	}
	// Thirteen of the schema and schema_version.
	if tables != 15 {
		t.Fatalf("%d tables in the schema, want 15", tables)
	}
	// Every node can write, and sees the others' writes.
	id := storetest.CreateSession(t, stores[0])
	if _, err := stores[n-1].Reader().GetSession(context.Background(), id); err != nil {
		t.Fatalf("another node's read: %v", err)
	}
}

func schemaOf(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		panic(err)
	}
	return cfg.RuntimeParams["search_path"]
}

func TestRegistryKeyNormalizesDSNs(t *testing.T) {
	key := func(dsn string) string {
		t.Helper()
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatalf("ParseConfig(%q): %v", dsn, err)
		}
		return registryKey(cfg)
	}
	a := key("postgres://u:secret@127.0.0.1:5432/db?sslmode=disable&search_path=s1&application_name=x")
	same := []string{
		"postgres://u:other@127.0.0.1:5432/db?application_name=x&search_path=s1&sslmode=disable",
		"host=127.0.0.1 port=5432 dbname=db user=u password=p search_path=s1 application_name=x sslmode=disable",
		"postgresql://u@127.0.0.1/db?search_path=s1&application_name=x&sslmode=disable&connect_timeout=3",
	}
	for _, d := range same {
		if k := key(d); k != a {
			t.Errorf("key(%q) = %q, want %q", d, k, a)
		}
	}
	different := []string{
		"postgres://u@127.0.0.1:5432/db?sslmode=disable&search_path=s2&application_name=x",
		"postgres://v@127.0.0.1:5432/db?sslmode=disable&search_path=s1&application_name=x",
		"postgres://u@127.0.0.1:5433/db?sslmode=disable&search_path=s1&application_name=x",
		"postgres://u@127.0.0.1:5432/db2?sslmode=disable&search_path=s1&application_name=x",
	}
	for _, d := range different {
		if k := key(d); k == a {
			t.Errorf("key(%q) = %q equals the first DSN's", d, k)
		}
	}
	if got := key("postgres://u:secret@h/db"); strings.Contains(got, "secret") {
		t.Errorf("key %q carries the password", got)
	}
}

func TestBadDSNIsInvalidArgument(t *testing.T) {
	_, err := Open(context.Background(), "postgres://u@h:notaport/db")
	if errs.CodeOf(err) != errs.InvalidArgumentCode {
		t.Fatalf("Open with a bad DSN: %v, want INVALID_ARGUMENT", err)
	}
}

func TestUnreachableServerIsUnavailable(t *testing.T) {
	// Port 1 on loopback refuses at once.
	_, err := Open(context.Background(), "postgres://u@127.0.0.1:1/db?connect_timeout=2&sslmode=disable")
	if errs.CodeOf(err) != errs.UnavailableCode {
		t.Fatalf("Open of an unreachable server: %v, want UNAVAILABLE", err)
	}
}

// The read pool's connections refuse writes whatever the SQL says.
func TestReadPoolIsReadOnly(t *testing.T) {
	s, _ := openFresh(t)
	_, err := s.pool.Exec(context.Background(), "UPDATE audit_chains SET tail_hash = 'forged'")
	if err == nil {
		t.Fatalf("a write through the read pool succeeded")
	}
	if errs.CodeOf(storeErr("write", err)) != errs.UnavailableCode {
		t.Fatalf("write through the read pool: %v, want a read-only transaction error", err)
	}
}
