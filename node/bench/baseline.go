package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/agentstate/agentstate/messages/ids"
	_ "github.com/mattn/go-sqlite3" // the "sqlite3" database/sql driver
)

// The seed baseline is PersistentSessionService.append_message as the
// original service had it (seed 000, see docs/SEEDS.md): four
// statements on a pooled connection, each committing on its own —
//
//  1. get the session (NOT_FOUND when missing)
//  2. count = COUNT(*) of the session's messages
//  3. INSERT the message with sequence = count
//  4. UPDATE the session's updated_at
//
// Steps 2 and 3 are not atomic, so concurrent appends to one session read
// the same count and store the same sequence; the (session_id, sequence)
// index is not unique, exactly as in the original, so nothing stops them.
// The verifier counts those duplicates. It is here as the comparison the
// targets are stated against, not as something to use. It is the design of
// tests/baseline's SessionService (which the seed tests run), with the
// client's message id kept and the run's durability.
const baselineSchema = `
CREATE TABLE sessions (
	session_id TEXT PRIMARY KEY,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE TABLE messages (
	message_id    TEXT PRIMARY KEY,
	session_id    TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
	sequence      INTEGER NOT NULL,
	role          TEXT NOT NULL,
	content       TEXT NOT NULL,
	metadata_json TEXT NOT NULL,
	created_at    INTEGER NOT NULL
);
CREATE INDEX messages_by_session ON messages(session_id, sequence);
`

// baselinePool is SQLAlchemy's default QueuePool (pool_size 5 +
// max_overflow 10), which the original services ran on.
const baselinePool = 15

// baselineBusyMillis is pysqlite's default lock timeout (5 s).
const baselineBusyMillis = 5000

// baseline is the seed design as a Target.
type baseline struct {
	db *sql.DB
}

func openBaseline(ctx context.Context, path, synchronous string) (*baseline, error) {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", strings.ToUpper(synchronous))
	q.Set("_busy_timeout", fmt.Sprint(baselineBusyMillis))
	q.Set("_foreign_keys", "1")
	db, err := sql.Open("sqlite3", (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(baselinePool)
	db.SetMaxIdleConns(baselinePool)
	if _, err := db.ExecContext(ctx, baselineSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("baseline schema: %w", err)
	}
	return &baseline{db: db}, nil
}

func (b *baseline) Close() error { return b.db.Close() }

func (b *baseline) CreateSessions(ctx context.Context, n int) ([]string, error) {
	out := make([]string, n)
	now := time.Now().UnixNano()
	for i := range out {
		out[i] = ids.New()
		if _, err := b.db.ExecContext(ctx,
			`INSERT INTO sessions(session_id, created_at, updated_at) VALUES (?, ?, ?)`,
			out[i], now, now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (b *baseline) Append(ctx context.Context, sessionID string, m Message) (Ack, error) {
	ack := Ack{Seq: -1, Attempts: 1}
	var one int
	err := b.db.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE session_id = ?`, sessionID).Scan(&one)
	if err != nil {
		return ack, fmt.Errorf("get session: %w", err)
	}
	var count int64
	err = b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE session_id = ?`, sessionID).Scan(&count)
	if err != nil {
		return ack, fmt.Errorf("count: %w", err)
	}
	role := "user"
	if m.Assistant {
		role = "assistant"
	}
	now := time.Now().UnixNano()
	_, err = b.db.ExecContext(ctx, `INSERT INTO messages(message_id, session_id, sequence, role, content,
		metadata_json, created_at) VALUES (?, ?, ?, ?, ?, '{}', ?)`, m.ID, sessionID, count, role, m.Content, now)
	if err != nil {
		return ack, fmt.Errorf("insert: %w", err)
	}
	_, err = b.db.ExecContext(ctx, `UPDATE sessions SET updated_at = ? WHERE session_id = ?`, now, sessionID)
	if err != nil {
		return ack, fmt.Errorf("update session: %w", err)
	}
	ack.Seq = count
	return ack, nil
}

func (b *baseline) ReadBack(ctx context.Context, sessionID string) ([]Stored, error) {
	rows, err := b.db.QueryContext(ctx,
		`SELECT message_id, sequence FROM messages WHERE session_id = ? ORDER BY sequence, rowid`, sessionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Stored
	for rows.Next() {
		var s Stored
		if err := rows.Scan(&s.ID, &s.Seq); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
