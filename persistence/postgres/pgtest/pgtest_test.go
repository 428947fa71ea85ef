package pgtest_test

import (
	"context"
	"testing"

	"github.com/agentstate/agentstate/persistence/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// A table made through one schema's DSN is invisible through another's, and
// the schema is gone once its test ended.
func TestSchemasAreIsolatedAndDropped(t *testing.T) {
	ctx := context.Background()
	var first string
	t.Run("make", func(t *testing.T) {
		a, b := pgtest.Schema(t, "pgtest_"), pgtest.Schema(t, "pgtest_")
		exec(t, a, "CREATE TABLE marker (x int)")
		if n := count(t, b, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'marker' AND table_schema = current_schema()"); n != 0 {
			t.Fatalf("the other schema sees %d marker tables", n)
		}
		first = schemaOf(t, a)
	})
	conn, err := pgx.Connect(ctx, pgtest.Base(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", first).Scan(&n); err != nil || n != 0 {
		t.Fatalf("schema %s left behind: %d (%v)", first, n, err)
	}
}

// A database made for a test answers on its URL and is dropped after it.
func TestDatabaseIsOwnAndDropped(t *testing.T) {
	ctx := context.Background()
	var name string
	t.Run("make", func(t *testing.T) {
		dsn := pgtest.Database(t, "pgtest_")
		if n := count(t, dsn, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"); n != 0 {
			t.Fatalf("a fresh database has %d tables", n)
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	conn, err := pgx.Connect(ctx, pgtest.Base(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %s left behind: %d (%v)", name, n, err)
	}
}

func exec(t *testing.T, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, dsn, sql string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func schemaOf(t *testing.T, dsn string) string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var s string
	if err := conn.QueryRow(context.Background(), "SELECT current_schema()").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
