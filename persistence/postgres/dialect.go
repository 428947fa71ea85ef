package postgres

import (
	"context"
	"errors"
	"strconv"

	"github.com/agentstate/agentstate/persistence/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dialect is PostgreSQL's statement text for package sqlstore: numbered
// $n placeholders, and a list as one array parameter.
type dialect struct{}

func (dialect) Arg(n int) string { return "$" + strconv.Itoa(n) }
func (dialect) Arrays() bool     { return true }

// poolDB runs sqlstore's statements on the read-only pool.
type poolDB struct {
	dialect
	pool *pgxpool.Pool
}

var _ sqlstore.DB = poolDB{}

func (p poolDB) Query(ctx context.Context, query string, args, dest []any, row func() error) error {
	rows, err := p.pool.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, dest, row)
	return err
}

func (p poolDB) QueryRow(ctx context.Context, query string, args, dest []any) error {
	return p.pool.QueryRow(ctx, query, args...).Scan(dest...)
}

func (poolDB) NoRows(err error) bool          { return errors.Is(err, pgx.ErrNoRows) }
func (poolDB) Err(op string, err error) error { return storeErr(op, err) }

// txDB runs sqlstore's statements in the writer's transaction, after what
// its pipeline holds; their errors go back as the applier's own
// statements' do.
type txDB struct {
	dialect
	a *applier
}

var _ sqlstore.DB = txDB{}

func (t txDB) Query(_ context.Context, query string, args, dest []any, row func() error) error {
	return t.a.forEachRow(query, args, dest, row)
}

func (t txDB) QueryRow(_ context.Context, query string, args, dest []any) error {
	return t.a.queryRow(query, args, dest...)
}

func (txDB) NoRows(err error) bool         { return errors.Is(err, pgx.ErrNoRows) }
func (txDB) Err(_ string, err error) error { return err }
