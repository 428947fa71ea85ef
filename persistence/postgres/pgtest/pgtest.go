// Package pgtest gives tests a PostgreSQL database or schema of their own on
// the server named by AGENTSTATE_TEST_POSTGRES, dropped when the test ends.
//
// Without the variable a test is skipped, except under CI (CI set), where a
// missing server fails it: a suite that needs PostgreSQL never passes there
// by skipping. `eval "$(bash .ci/postgres.sh)"` installs and starts a server
// on 127.0.0.1 and sets the variable.
package pgtest

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/messages/ids"
	"github.com/jackc/pgx/v5"
)

// Env names the variable that holds the server's DSN.
const Env = "AGENTSTATE_TEST_POSTGRES"

// Base returns the server's DSN, or skips tb (fails it under CI) when there
// is none.
func Base(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv(Env)
	if base == "" {
		msg := "no PostgreSQL server for this test: set " + Env + " to a DSN of a role that may create " +
			"databases; `eval \"$(bash .ci/postgres.sh)\"` installs and starts one on 127.0.0.1 and sets it"
		if os.Getenv("CI") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return base
}

// Database creates a database named prefix plus a fresh ULID and returns a
// postgres:// URL that selects it; it is dropped (forcing connections off)
// when the test ends. The server's DSN must be a URL and its role may create
// databases: a node's --data takes only the URL form.
func Database(tb testing.TB, prefix string) string {
	tb.Helper()
	base := Base(tb)
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		tb.Fatalf("%s must be a postgres:// URL: %q", Env, base)
	}
	conn := connect(tb, base)
	defer conn.Close(context.Background())
	name := prefix + strings.ToLower(ids.New())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create database %s (the role needs CREATEDB): %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, base); err == nil {
			if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
				tb.Logf("drop database %s: %v", name, err)
			}
			c.Close(ctx)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// Schema creates a schema named prefix plus a fresh ULID in the server's
// database and returns the DSN (URL or key=value, as given) with its
// search_path set to it; the schema is dropped when the test ends. It needs
// no CREATEDB.
func Schema(tb testing.TB, prefix string) string {
	tb.Helper()
	base := Base(tb)
	conn := connect(tb, base)
	name := prefix + strings.ToLower(ids.New())
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		conn.Close(context.Background())
		tb.Fatalf("create schema %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			tb.Logf("drop schema %s: %v", name, err)
		}
		conn.Close(ctx)
	})
	if u, err := url.Parse(base); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", name)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return base + " search_path=" + name
}

func connect(tb testing.TB, base string) *pgx.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("%s is set but the server cannot be reached: %v", Env, err)
	}
	return conn
}
