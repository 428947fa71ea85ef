package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// dropTimeout bounds dropping a run's database.
const dropTimeout = 30 * time.Second

// pgDatabase creates a database of its own for one run on the server base
// names (a postgres:// URL of a role that may create databases) and
// returns its URL and a function that drops it, forcing connections off.
// A fresh database per run: no run reads another's rows, indexes or bloat.
func pgDatabase(ctx context.Context, base string) (dsn string, drop func() error, err error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("bench: the PostgreSQL server must be a postgres:// URL (got %q)", redactURL(base))
	}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("bench: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	name := "agentstate_bench_" + strings.ToLower(ids.New())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("bench: create database %s (the role needs CREATEDB): %w", name, err)
	}
	drop = func() error {
		dctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		c, err := pgx.Connect(dctx, base)
		if err != nil {
			return fmt.Errorf("%w %s: %w", ErrDropDatabase, name, err)
		}
		defer c.Close(dctx)
		_, err = c.Exec(dctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" {
			// insufficient_privilege: FORCE may not terminate an
			// autovacuum worker that the run's writes started (it has
			// no role of ours); a plain DROP stops it, once the run's
			// own connections are gone, as they are by now.
			_, err = c.Exec(dctx, "DROP DATABASE IF EXISTS "+name)
		}
		if err != nil {
			return fmt.Errorf("%w %s: %w", ErrDropDatabase, name, err)
		}
		return nil
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// ErrDropDatabase is a run's failure to drop the database it made, after
// it measured: the figures stand, and the database is left for the
// operator to drop (another role's connection to it stops even a forced
// drop).
var ErrDropDatabase = errors.New("bench: drop database")

// redactURL hides a URL's password for messages.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(not a URL)"
}

// pgDurabilityPrefix starts the durability of every PostgreSQL result.
const pgDurabilityPrefix = "pg "

// pgDurability names the server's durability for the results' durability
// column: fsync and synchronous_commit as the server runs them.
func pgDurability(ctx context.Context, conn *pgx.Conn) (string, error) {
	var fsync, sc string
	if err := conn.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &sc); err != nil {
		return "", err
	}
	return pgDurabilityPrefix + "fsync=" + fsync + " sc=" + sc, nil
}

// runPostgres measures one mode on a fresh database of the server
// cfg.Postgres: the node in this process or served over gRPC on the
// PostgreSQL store, or the raw PostgreSQL ceiling.
func runPostgres(ctx context.Context, cfg Config, dir string) (res Result, err error) {
	dsn, drop, err := pgDatabase(ctx, cfg.Postgres)
	if err != nil {
		return Result{}, err
	}
	defer func() { err = errors.Join(err, drop()) }()
	durability, err := pgServerDurability(ctx, dsn)
	if err != nil {
		return Result{}, err
	}
	d, err := newDBCPU(ctx, dsn)
	if err != nil {
		return Result{}, err
	}
	defer d.close()
	cfg.dbCPU = func() time.Duration { return d.read(ctx) }
	res, err = runPostgresMode(ctx, cfg, dsn, dir)
	res.Synchronous = durability
	return res, err
}

func pgServerDurability(ctx context.Context, dsn string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("bench: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return pgDurability(ctx, conn)
}

func runPostgresMode(ctx context.Context, cfg Config, dsn, dir string) (Result, error) {
	switch cfg.Mode {
	case ModeRaw:
		return runRawPG(ctx, cfg, dsn, RawBatch)
	case ModeRawClosed:
		return runRawPG(ctx, cfg, dsn, cfg.Callers)
	case ModeInProcess, ModeGRPC, ModeGRPCStream, ModeGRPCUnary:
		if isGRPC(cfg.Mode) && len(cfg.Serve) > 0 {
			cfg.Serve = append(append([]string(nil), cfg.Serve...), "--data", dsn)
			return runServed(ctx, cfg, dir)
		}
		store, err := postgres.Open(ctx, dsn)
		if err != nil {
			return Result{}, err
		}
		n, err := startNodeStore(store, cfg.IdleTimeout)
		if err != nil {
			return Result{}, err
		}
		if cfg.Mode == ModeInProcess {
			res, err := Drive(ctx, cfg, n.target())
			return res, errors.Join(err, stopNode(n))
		}
		return runLoopbackNode(ctx, cfg, n)
	}
	return Result{}, fmt.Errorf("bench: mode %s has no PostgreSQL variant (inprocess, grpc, grpc-stream, grpc-unary, raw, raw-closed do)", cfg.Mode)
}
