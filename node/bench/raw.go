package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence/sqlite"
)

// The raw ceiling: the rows agentstate stores for the workload — the
// message tables of persistence/sqlite, same columns, same keys, same
// triggers, same layout (schema migrations 5, 7 and the keyed items' key and kind: content rows in
// message_rows, each with an entry in message_pending or message_index,
// written pending and settled into message_index once sqlite.SettleRows are
// pending, or settled at once in transactions of many rows per session;
// TestRawSchemaIsTheStores holds it to the store's) — inserted by one
// goroutine through one prepared statement, RawBatch rows per transaction,
// in WAL mode with the run's synchronous and IMMEDIATE transactions like
// agentstate's writer. No actors, no validation, no per-append answer: the
// most this disk and SQLite give for these rows, measured in the same run.
const rawSchema = `
CREATE TABLE sessions (
	session_id TEXT PRIMARY KEY,
	updated_at INTEGER NOT NULL
);
CREATE TABLE message_rows (
	id            INTEGER PRIMARY KEY,
	session_id    TEXT NOT NULL,
	sequence      INTEGER NOT NULL,
	message_id    TEXT NOT NULL,
	role          INTEGER NOT NULL,
	content       TEXT NOT NULL,
	metadata_json TEXT NOT NULL,
	created_at    INTEGER NOT NULL,
	event_at      INTEGER NOT NULL DEFAULT 0,
	indexed       INTEGER NOT NULL DEFAULT 0,
	item_key      TEXT NOT NULL DEFAULT '',
	kind          TEXT NOT NULL DEFAULT '',
	UNIQUE (message_id, session_id)
);
CREATE UNIQUE INDEX message_rows_by_key ON message_rows(session_id, item_key) WHERE item_key != '';
CREATE INDEX message_rows_by_kind ON message_rows(session_id, kind, sequence) WHERE kind != '';
CREATE TABLE message_index (
	session_id TEXT NOT NULL,
	sequence   INTEGER NOT NULL,
	id         INTEGER NOT NULL,
	PRIMARY KEY (session_id, sequence)
) WITHOUT ROWID;
CREATE TABLE message_pending (
	session_id TEXT NOT NULL,
	sequence   INTEGER NOT NULL,
	id         INTEGER NOT NULL,
	PRIMARY KEY (session_id, sequence)
) WITHOUT ROWID;
CREATE TRIGGER message_rows_insert_pending AFTER INSERT ON message_rows WHEN NEW.indexed = 0 BEGIN
	INSERT INTO message_pending (session_id, sequence, id) VALUES (NEW.session_id, NEW.sequence, NEW.id);
END;
CREATE TRIGGER message_rows_insert_indexed AFTER INSERT ON message_rows WHEN NEW.indexed != 0 BEGIN
	INSERT INTO message_index (session_id, sequence, id) VALUES (NEW.session_id, NEW.sequence, NEW.id);
END;
CREATE TRIGGER message_rows_delete AFTER DELETE ON message_rows BEGIN
	DELETE FROM message_index WHERE session_id = OLD.session_id AND sequence = OLD.sequence AND id = OLD.id;
	DELETE FROM message_pending WHERE session_id = OLD.session_id AND sequence = OLD.sequence AND id = OLD.id;
END;
`

// rawSettleSQL settles every pending entry at once: the same work per row
// as the store's slices (which spread it over transactions), in one
// statement pair.
const rawSettleSQL = `INSERT INTO message_index (session_id, sequence, id)
	SELECT session_id, sequence, id FROM message_pending ORDER BY session_id, sequence;
DELETE FROM message_pending`

// runRaw measures the ceiling for cfg's sessions and appends in
// transactions of batch rows. Rows go to the sessions round-robin (row i to
// session i mod S, as the workload's appends), so sequences are dense per
// session.
func runRaw(ctx context.Context, cfg Config, path string, batch int) (Result, error) {
	res := newResult(cfg)
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", strings.ToUpper(cfg.Synchronous))
	q.Set("_txlock", "immediate")
	q.Set("_foreign_keys", "1")
	db, err := sql.Open("sqlite3", (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		return res, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, rawSchema); err != nil {
		return res, fmt.Errorf("raw schema: %w", err)
	}
	sessions, err := rawSessions(ctx, db, cfg.Sessions)
	if err != nil {
		return res, err
	}
	msgIDs := make([]string, cfg.Appends)
	for i := range msgIDs {
		msgIDs[i] = ids.New()
	}
	content := strings.Repeat("x", cfg.MessageBytes)

	// As the store's writer: rows pending where a transaction carries
	// fewer than sqlite.PendingRowsPerSession per session, settled at once
	// otherwise.
	indexed := 0
	if batch >= sqlite.PendingRowsPerSession*min(cfg.Sessions, batch) {
		indexed = 1
	}
	pending := 0
	err = timeBatches(cfg, batch, &res, func(lo, hi int) error {
		if indexed == 0 {
			pending += hi - lo
		}
		settle := pending >= sqlite.SettleRows
		if settle {
			pending = 0
		}
		return rawBatch(ctx, db, sessions, msgIDs, content, lo, hi, indexed, settle)
	})
	if err != nil {
		return res, err
	}

	if err := verifyRaw(ctx, db, cfg, &res); err != nil {
		return res, err
	}
	return res, nil
}

// timeBatches writes the run's appends through write, batch rows per
// call (one transaction each), timed, and fills res's duration, rate, CPU
// per append and rows per transaction.
func timeBatches(cfg Config, batch int, res *Result, write func(lo, hi int) error) error {
	var done atomic.Int64
	stopProgress := progress(cfg, &done)
	defer stopProgress()
	cpu0, t0 := processCPU(), time.Now()
	commits := 0
	for lo := 0; lo < cfg.Appends; lo += batch {
		hi := min(lo+batch, cfg.Appends)
		if err := write(lo, hi); err != nil {
			return fmt.Errorf("raw insert: %w", err)
		}
		commits++
		done.Store(int64(hi))
	}
	res.Duration = time.Since(t0)
	cpu := processCPU() - cpu0
	res.Appends = cfg.Appends
	res.MeanBatch = float64(cfg.Appends) / float64(commits)
	res.rate(cpu)
	return nil
}

// rawSessions creates n sessions in one transaction (not timed).
func rawSessions(ctx context.Context, db *sql.DB, n int) ([]string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	sessions := make([]string, n)
	for i := range sessions {
		sessions[i] = ids.New()
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions VALUES (?, 0)`, sessions[i]); err != nil {
			return nil, err
		}
	}
	return sessions, tx.Commit()
}

func rawBatch(ctx context.Context, db *sql.DB, sessions, msgIDs []string, content string, lo, hi, indexed int, settle bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	ins, err := tx.PrepareContext(ctx, `INSERT INTO message_rows(session_id, sequence, message_id, role,
		content, metadata_json, created_at, indexed) VALUES (?, ?, ?, ?, ?, '{}', ?, ?)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	now := time.Now().UnixNano()
	s := len(sessions)
	for i := lo; i < hi; i++ {
		if _, err := ins.ExecContext(ctx, sessions[i%s], i/s, msgIDs[i], 1+i%2, content, now, indexed); err != nil {
			return err
		}
	}
	if settle {
		if _, err := tx.ExecContext(ctx, rawSettleSQL); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// verifyRaw checks every session holds a dense run of sequences and that
// every row is there.
func verifyRaw(ctx context.Context, db *sql.DB, cfg Config, res *Result) error {
	rows, err := db.QueryContext(ctx, `SELECT COUNT(*), COALESCE(MAX(sequence), -1), COUNT(DISTINCT sequence)
		FROM message_rows GROUP BY session_id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var n, top, distinct int
		if err := rows.Scan(&n, &top, &distinct); err != nil {
			return err
		}
		res.Stored += n
		res.Duplicates += n - distinct
		res.Gaps += top + 1 - distinct
	}
	if err := rows.Err(); err != nil {
		return err
	}
	res.Missing = max(0, cfg.Appends-res.Stored)
	res.Complete = res.Missing == 0 && res.Duplicates == 0 && res.Gaps == 0
	return nil
}
