package postgres

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/messages/ids"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Server discovery. The tests run against the server of the DSN in
// AGENTSTATE_TEST_POSTGRES. Each run makes a database of its own (or, for a
// role that may not create databases, schemas of its own in the given one)
// and drops it at the end, so runs are independent; each test then gets a
// fresh schema in it.
const envDSN = "AGENTSTATE_TEST_POSTGRES"

const noServerHelp = "no PostgreSQL server for the tests: set " + envDSN + " to a DSN of a role that may create " +
	"databases; `eval \"$(bash .ci/postgres.sh)\"` installs and starts one on 127.0.0.1 and sets it"

var server struct {
	// problem says why there is no server; "" when there is one.
	problem string
	// dsn reaches the run's database; admin is a pool on it that may write.
	dsn   string
	admin *pgxpool.Pool
	// prefix names this run's schemas.
	prefix  string
	schemas atomic.Int64
}

func TestMain(m *testing.M) {
	cleanup := setupServer()
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func setupServer() (cleanup func()) {
	base := os.Getenv(envDSN)
	if base == "" {
		server.problem = noServerHelp
		return func() {}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		server.problem = fmt.Sprintf("%s is set but the server cannot be reached: %v", envDSN, err)
		return func() {}
	}
	defer conn.Close(ctx)
	run := "agentstate_test_" + strings.ToLower(ids.New())
	server.prefix = "t_"
	server.dsn = base
	dropDB := ""
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+run); err == nil {
		server.dsn = withParam(base, "dbname", run)
		dropDB = run
	} else {
		// No CREATEDB: schemas of this run in the given database.
		server.prefix = run + "_"
	}
	server.admin, err = pgxpool.New(ctx, server.dsn)
	if err != nil {
		server.problem = fmt.Sprintf("connect to the test database: %v", err)
		return func() {}
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if dropDB == "" {
			rows, _ := server.admin.Query(ctx, "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1", server.prefix+"%")
			schemas, _ := pgx.CollectRows(rows, pgx.RowTo[string])
			for _, s := range schemas {
				server.admin.Exec(ctx, "DROP SCHEMA "+s+" CASCADE")
			}
		}
		server.admin.Close()
		if dropDB != "" {
			if c, err := pgx.Connect(ctx, base); err == nil {
				c.Exec(ctx, "DROP DATABASE IF EXISTS "+dropDB+" WITH (FORCE)")
				c.Close(ctx)
			}
		}
	}
}

// withParam sets one connection parameter of a URL or key=value DSN.
func withParam(dsn, key, value string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if key == "dbname" {
			u.Path = "/" + value
		} else {
			q := u.Query()
			q.Set(key, value)
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	// key=value: a later setting overrides an earlier one.
	return dsn + " " + key + "=" + value
}

// requireServer fails the test (in CI, where CI is set) or skips it when
// there is no server.
func requireServer(t testing.TB) {
	t.Helper()
	if server.problem == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(server.problem)
	}
	t.Skip(server.problem)
}

// freshDSN creates an empty schema and returns a DSN whose search_path
// selects it.
func freshDSN(t testing.TB) string {
	t.Helper()
	requireServer(t)
	name := fmt.Sprintf("%s%d", server.prefix, server.schemas.Add(1))
	if _, err := server.admin.Exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("create schema %s: %v", name, err)
	}
	return withParam(server.dsn, "search_path", name)
}

// openFresh opens a Store on a fresh schema and closes it when the test
// ends, unless the test closed it.
func openFresh(t testing.TB, opts ...Option) (*Store, string) {
	t.Helper()
	dsn := freshDSN(t)
	return mustOpen(t, dsn, opts...), dsn
}

func mustOpen(t testing.TB, dsn string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if registry.Refs(s) > 0 {
			s.Close()
		}
	})
	return s
}

// migrationWith is the index in migrations of the first migration that
// contains sql; there must be one, and one before it.
func migrationWith(t testing.TB, sql string) int {
	t.Helper()
	i := slices.IndexFunc(migrations, func(m string) bool { return strings.Contains(m, sql) })
	if i < 1 {
		t.Fatalf("no migration after the first contains %q", sql)
	}
	return i
}

// olderSchema is a fresh schema as an older build left it: migrations
// [:before] applied and recorded in schema_version, as migrate records
// them. It returns the schema's DSN and a connection to it that closes at
// the test's end.
func olderSchema(t testing.TB, before int) (string, *pgx.Conn) {
	t.Helper()
	dsn := freshDSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for v, m := range migrations[:before] {
		if _, err := conn.Exec(ctx, m); err != nil {
			t.Fatalf("migration %d: %v", v+1, err)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO schema_version (version) VALUES ($1)", v+1); err != nil {
			t.Fatal(err)
		}
	}
	return dsn, conn
}
