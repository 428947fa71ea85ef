package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentstate/agentstate/persistence/sqlstore"
)

// migrate brings the database to the latest schema version inside one
// IMMEDIATE transaction, so concurrent processes serialize on the write
// lock and each version is applied exactly once per database. It returns
// how many migrations it applied.
func migrate(ctx context.Context, conn *sql.Conn) (int, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return 0, err
	}
	applied, err := sqlstore.Migrate("database schema", version, migrations, func(stmt string) error {
		_, err := tx.ExecContext(ctx, stmt)
		return err
	}, nil)
	if err != nil {
		return 0, err
	}
	if applied == 0 {
		return 0, nil
	}
	if version < usageVersion() {
		if err := fillUsage(ctx, tx); err != nil {
			return 0, fmt.Errorf("migration %d: count the stored bytes: %w", usageVersion(), err)
		}
	}
	// PRAGMA takes no bound parameters; the value is our own integer.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		return 0, err
	}
	return applied, tx.Commit()
}
