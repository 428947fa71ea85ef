package baseline

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentstate/agentstate/messages/ids"
	_ "github.com/mattn/go-sqlite3" // the engine the upstream repositories run on
)

// ErrSessionNotFound mirrors upstream SessionNotFoundError.
var ErrSessionNotFound = errors.New("baseline: session not found")

// sessionSchema is the #255 schema as far as the race needs it. The
// composite index on (session_id, sequence) is NOT unique upstream, which is
// why the duplicate sequences of #7326 are stored rather than rejected.
const sessionSchema = `
CREATE TABLE IF NOT EXISTS sessions (
	id         TEXT PRIMARY KEY,
	actor_name TEXT NOT NULL,
	namespace  TEXT NOT NULL DEFAULT 'local',
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_sessions_created_at ON sessions (created_at);
CREATE INDEX IF NOT EXISTS ix_sessions_actor_name ON sessions (actor_name);
CREATE TABLE IF NOT EXISTS session_messages (
	id         TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	role       TEXT NOT NULL,
	content    TEXT NOT NULL,
	sequence   INTEGER NOT NULL,
	timestamp  TEXT NOT NULL,
	metadata   TEXT NOT NULL DEFAULT '{}',
	created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_session_messages_session_sequence
	ON session_messages (session_id, sequence);
`

// SessionService ports PersistentSessionService
// (application/services/session_service.py) on a pooled SQLite engine.
//
// It keeps the seed's defect on purpose: AppendMessage takes the next
// sequence from a COUNT(*) that runs as its own statement before, and
// outside, the INSERT that uses it (seed 000, lines 184–195). Concurrent
// appends to one session read the same count and store the same sequence.
//
// Safe for concurrent use in the sense upstream is: every statement is
// atomic, no sequence of them is.
type SessionService struct {
	db *sql.DB
}

// OpenSessionService opens (creating) the SQLite database file at path in
// WAL mode and creates the schema. synchronous=NORMAL keeps the stress test
// quick; the race does not depend on it.
func OpenSessionService(path string) (*SessionService, error) {
	dsn := "file:" + path + "?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=30000&_foreign_keys=1"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, err
	}
	// SQLAlchemy's QueuePool default: pool_size 5 + max_overflow 10.
	db.SetMaxOpenConns(15)
	db.SetMaxIdleConns(15)
	if _, err := db.Exec(sessionSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("baseline: session schema: %w", err)
	}
	return &SessionService{db: db}, nil
}

// Close closes the engine.
func (s *SessionService) Close() error { return s.db.Close() }

// Create mirrors PersistentSessionService.create: a ULID id, committed
// before it returns.
func (s *SessionService) Create(ctx context.Context, actorName string) (string, error) {
	id := ids.New()
	now := time.Now().UTC().Format(time.RFC3339Nano)
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO sessions (id, actor_name, created_at, updated_at) VALUES (?, ?, ?, ?)`,
		id, actorName, now, now)
	return id, err
}

// AppendMessage mirrors PersistentSessionService.append_message step by
// step (original-services.md §1.1); each step is its own auto-committed
// statement, as each repository call is upstream.
func (s *SessionService) AppendMessage(ctx context.Context, sessionID, role, content string) (sequence int64, err error) {
	// 1. session_repo.get_by_id
	var exists int
	releaseGIL()
	err = s.db.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, sessionID).Scan(&exists)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrSessionNotFound
	}
	if err != nil {
		return 0, err
	}
	// 2. content sanitisation is pure and touches no shared state: omitted.
	// 3. count = message_repo.count_for_session(session_id)  — the check.
	var count int64
	releaseGIL()
	if err := s.db.QueryRowContext(ctx,
		`SELECT COUNT(*) FROM session_messages WHERE session_id = ?`, sessionID).Scan(&count); err != nil {
		return 0, err
	}
	// 4. SessionMessage(sequence=count); message_repo.append  — the use.
	// Another append may have inserted between 3 and 4: the TOCTOU of #7326.
	now := time.Now().UTC().Format(time.RFC3339Nano)
	releaseGIL()
	if _, err := s.db.ExecContext(ctx,
		`INSERT INTO session_messages (id, session_id, role, content, sequence, timestamp, metadata, created_at)
		 VALUES (?, ?, ?, ?, ?, ?, '{}', ?)`,
		ids.New(), sessionID, role, content, count, now, now); err != nil {
		return 0, err
	}
	// 5. session.updated_at = now; session_repo.update(session)
	releaseGIL()
	if _, err := s.db.ExecContext(ctx,
		`UPDATE sessions SET updated_at = ? WHERE id = ?`, now, sessionID); err != nil {
		return 0, err
	}
	return count, nil
}

// StoredMessage is a stored session_messages row, as far as the tests
// need it.
type StoredMessage struct {
	Sequence int64
	Content  string
}

// Messages returns every stored message of the session ordered by
// (sequence, rowid), duplicate sequences included.
func (s *SessionService) Messages(ctx context.Context, sessionID string) ([]StoredMessage, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT sequence, content FROM session_messages WHERE session_id = ? ORDER BY sequence, rowid`, sessionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []StoredMessage
	for rows.Next() {
		var m StoredMessage
		if err := rows.Scan(&m.Sequence, &m.Content); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
