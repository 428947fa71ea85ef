package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence/postgres"
	"github.com/jackc/pgx/v5"
)

// The raw PostgreSQL ceiling: the rows the PostgreSQL store writes for the
// workload's appends — session_messages rows, each session's next_sequence
// and updated_at moved, in the store's own schema (migrated by
// postgres.Open, so the same keys, indexes and constraints) — written by a
// plain pgx client on one connection: per transaction of `batch` rows one
// multi-row INSERT of every row (unnest of arrays) and one UPDATE of the
// sessions touched, pipelined in one round trip and one commit (one
// fsync, as the server's fsync and synchronous_commit say). No actors, no
// fencing, no per-append answer: the most this server gives for these
// rows at this transaction size, measured in the same run.
const (
	rawPGInsertSQL = `INSERT INTO session_messages (session_id, sequence, message_id, role, content, metadata_json, created_at)
	SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::bigint[])`
	rawPGMoveSQL = `UPDATE sessions s SET next_sequence = s.next_sequence + u.n, updated_at = $3
	FROM unnest($1::text[], $2::bigint[]) AS u(id, n) WHERE s.session_id = u.id`
	rawPGSessionSQL = `INSERT INTO sessions (session_id, actor_name, namespace, automation, metadata_json, state, created_at, updated_at)
	SELECT id, 'bench', 'local', '', '{}', 1, $2, $2 FROM unnest($1::text[]) AS id`
)

// runRawPG measures the ceiling for cfg's sessions and appends in
// transactions of batch rows on the database dsn. Rows go to the sessions
// round-robin (row i to session i mod S, as the workload's appends), so
// sequences are dense per session.
func runRawPG(ctx context.Context, cfg Config, dsn string, batch int) (Result, error) {
	res := newResult(cfg)
	// The store's schema, exactly: opened once to migrate, then closed.
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		return res, err
	}
	if err := st.Close(); err != nil {
		return res, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return res, fmt.Errorf("raw: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	sessions := make([]string, cfg.Sessions)
	for i := range sessions {
		sessions[i] = ids.New()
	}
	if _, err := conn.Exec(ctx, rawPGSessionSQL, sessions, time.Now().UnixNano()); err != nil {
		return res, fmt.Errorf("raw sessions: %w", err)
	}
	msgIDs := make([]string, cfg.Appends)
	for i := range msgIDs {
		msgIDs[i] = ids.New()
	}
	content := strings.Repeat("x", cfg.MessageBytes)

	db0 := cfg.dbCPU()
	err = timeBatches(cfg, batch, &res, func(lo, hi int) error {
		return rawPGBatch(ctx, conn, sessions, msgIDs, content, lo, hi)
	})
	if err != nil {
		return res, err
	}
	res.DBCPUPerAppend = max(cfg.dbCPU()-db0, 0) / time.Duration(max(res.Appends, 1))
	return res, verifyRawPG(ctx, conn, cfg, &res)
}

// rawPGBatch writes rows lo..hi-1 in one implicit transaction: both
// statements go in one pipeline with one Sync, so the server commits them
// together, once.
func rawPGBatch(ctx context.Context, conn *pgx.Conn, sessions, msgIDs []string, content string, lo, hi int) error {
	n := hi - lo
	sid, msg, body, meta := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	seq, role, at := make([]int64, n), make([]int64, n), make([]int64, n)
	now := time.Now().UnixNano()
	s := len(sessions)
	moved := map[string]int64{}
	for j, i := 0, lo; i < hi; i, j = i+1, j+1 {
		sid[j], seq[j], msg[j], role[j], body[j], meta[j], at[j] = sessions[i%s], int64(i/s), msgIDs[i], int64(1+i%2), content, "{}", now
		moved[sid[j]]++
	}
	touched, counts := make([]string, 0, len(moved)), make([]int64, 0, len(moved))
	for id, c := range moved {
		touched, counts = append(touched, id), append(counts, c)
	}
	b := &pgx.Batch{}
	b.Queue(rawPGInsertSQL, sid, seq, msg, role, body, meta, at)
	b.Queue(rawPGMoveSQL, touched, counts, now)
	return conn.SendBatch(ctx, b).Close()
}

// verifyRawPG checks every session holds a dense run of sequences that
// its next_sequence agrees with, and that every row is there.
func verifyRawPG(ctx context.Context, conn *pgx.Conn, cfg Config, res *Result) error {
	rows, err := conn.Query(ctx, `SELECT count(m.sequence), coalesce(max(m.sequence), -1), count(DISTINCT m.sequence), s.next_sequence
		FROM sessions s LEFT JOIN session_messages m ON m.session_id = s.session_id GROUP BY s.session_id, s.next_sequence`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var n, top, distinct, next int64
		if err := rows.Scan(&n, &top, &distinct, &next); err != nil {
			return err
		}
		res.Stored += int(n)
		res.Duplicates += int(n - distinct)
		res.Gaps += int(top + 1 - distinct)
		if next != n {
			res.Misplaced++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	res.Missing = max(0, cfg.Appends-res.Stored)
	res.Complete = res.Missing == 0 && res.Duplicates == 0 && res.Gaps == 0 && res.Misplaced == 0
	return nil
}
