package postgres

import (
	"context"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dialect is PostgreSQL's side of package sqlstore: numbered $n
// placeholders, a list as one array parameter, pgx's ErrNoRows and
// storeErr.
type dialect struct{}

func (dialect) Arg(n int) string               { return "$" + strconv.Itoa(n) }
func (dialect) Arrays() bool                   { return true }
func (dialect) NoRows(err error) bool          { return errors.Is(err, pgx.ErrNoRows) }
func (dialect) Err(op string, err error) error { return storeErr(op, err) }

// poolDB runs sqlstore's statements on the read-only pool.
type poolDB struct {
	dialect
	pool *pgxpool.Pool
}

func (p poolDB) Query(ctx context.Context, query string, args, dest []any, row func() error) error {
	rows, err := p.pool.Query(ctx, query, args...)
	if err == nil {
		_, err = pgx.ForEachRow(rows, dest, row)
	}
	return err
}

func (p poolDB) QueryRow(ctx context.Context, query string, args, dest []any) error {
	return p.pool.QueryRow(ctx, query, args...).Scan(dest...)
}

// txDB runs them in the writer's transaction, after what its pipeline
// holds, as the applier's own statements run (forEachRow, queryRow).
type txDB struct {
	dialect
	a *applier
}

func (t txDB) Query(_ context.Context, query string, args, dest []any, row func() error) error {
	return t.a.forEachRow(query, args, dest, row)
}

func (t txDB) QueryRow(_ context.Context, query string, args, dest []any) error {
	return t.a.queryRow(query, args, dest...)
}
