package sqlite

import (
	"context"
	"database/sql"
	"errors"
)

// dialect is SQLite's side of package sqlstore: positional ? placeholders,
// a list as one parameter per value, database/sql's ErrNoRows and storeErr.
type dialect struct{}

func (dialect) Arg(int) string                 { return "?" }
func (dialect) Arrays() bool                   { return false }
func (dialect) NoRows(err error) bool          { return errors.Is(err, sql.ErrNoRows) }
func (dialect) Err(op string, err error) error { return storeErr(op, err) }

// poolDB runs sqlstore's statements on the read-only pool, txDB in the
// writer's transaction (whose statements' errors the writer classifies).
type (
	poolDB struct {
		dialect
		db *sql.DB
	}
	txDB struct {
		dialect
		a *applier
	}
)

func (p poolDB) Query(ctx context.Context, query string, args, dest []any, row func() error) error {
	rows, err := p.db.QueryContext(ctx, query, args...)
	return eachRow(rows, err, dest, row)
}

func (p poolDB) QueryRow(ctx context.Context, query string, args, dest []any) error {
	return p.db.QueryRowContext(ctx, query, args...).Scan(dest...)
}

func (t txDB) Query(_ context.Context, query string, args, dest []any, row func() error) error {
	rows, err := t.a.tx.QueryContext(t.a.ctx, query, args...)
	return eachRow(rows, err, dest, row)
}

func (t txDB) QueryRow(_ context.Context, query string, args, dest []any) error {
	return t.a.queryRow(query, args...).Scan(dest...)
}

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
