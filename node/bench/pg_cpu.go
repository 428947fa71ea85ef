package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// dbCPU reads the CPU time PostgreSQL's backends serving one database have
// used so far: where the store's statements cost, which the process's own
// CPU (CPUPerAppend) leaves out. It reads /proc, so it counts only when the
// server runs on this machine and its processes are readable (otherwise
// 0); a backend that exits in the window is left out, and one that starts
// in it counts whole, connection start included.
type dbCPU struct {
	conn *pgx.Conn
}

// newDBCPU connects to dsn to list its database's backends (its own left
// out).
func newDBCPU(ctx context.Context, dsn string) (*dbCPU, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: connect to PostgreSQL: %w", err)
	}
	return &dbCPU{conn: conn}, nil
}

// read sums the backends' CPU time; 0 when they cannot be listed.
func (d *dbCPU) read(ctx context.Context) time.Duration {
	rows, err := d.conn.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return 0
	}
	var total time.Duration
	var pid int32
	_, err = pgx.ForEachRow(rows, []any{&pid}, func() error {
		total += childCPU(int(pid))
		return nil
	})
	if err != nil {
		return 0
	}
	return total
}

func (d *dbCPU) close() { d.conn.Close(context.Background()) }
