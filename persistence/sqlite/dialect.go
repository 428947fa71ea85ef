package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// dialect is SQLite's statement text for package sqlstore: positional ?
// placeholders, and a list as one parameter per value.
type dialect struct{}

func (dialect) Arg(int) string { return "?" }
func (dialect) Arrays() bool   { return false }

// poolDB runs sqlstore's statements on the read-only pool.
type poolDB struct {
	dialect
	db *sql.DB
}

var _ sqlstore.DB = poolDB{}

func (p poolDB) Query(ctx context.Context, query string, args, dest []any, row func() error) error {
	rows, err := p.db.QueryContext(ctx, query, args...)
	return eachRow(rows, err, dest, row)
}

func (p poolDB) QueryRow(ctx context.Context, query string, args, dest []any) error {
	return p.db.QueryRowContext(ctx, query, args...).Scan(dest...)
}

func (poolDB) NoRows(err error) bool          { return errors.Is(err, sql.ErrNoRows) }
func (poolDB) Err(op string, err error) error { return storeErr(op, err) }

// txDB runs sqlstore's statements in the writer's transaction; their
// errors go back unclassified, as the applier's own statements' do.
type txDB struct {
	dialect
	a *applier
}

var _ sqlstore.DB = txDB{}

func (t txDB) Query(_ context.Context, query string, args, dest []any, row func() error) error {
	rows, err := t.a.tx.QueryContext(t.a.ctx, query, args...)
	return eachRow(rows, err, dest, row)
}

func (t txDB) QueryRow(_ context.Context, query string, args, dest []any) error {
	return t.a.queryRow(query, args...).Scan(dest...)
}

func (txDB) NoRows(err error) bool         { return errors.Is(err, sql.ErrNoRows) }
func (txDB) Err(_ string, err error) error { return err }

// eachRow scans each of rows (unless err) into dest and calls row, then
// closes rows.
func eachRow(rows *sql.Rows, err error, dest []any, row func() error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if err := row(); err != nil {
			return err
		}
	}
	return rows.Err()
}
