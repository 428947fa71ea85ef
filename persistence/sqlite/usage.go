package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"strconv"

	"github.com/agentstate/agentstate/persistence"
)

// Stored bytes per namespace (persistence/usage.go says what counts):
// namespace_usage holds each namespace's running total. The applier books
// every statement that stores or removes counted bytes in its ledger
// (persistence.Usage) and adds the transaction's deltas before COMMIT
// (flushUsage), so the totals move with the data they count. A pooled
// append books its bytes in its session's namespace (sessionNames) and
// costs no statement of its own.

// usageMigration creates namespace_usage; migrate then fills it
// (recountUsage), in the same transaction.
const usageMigration = `
CREATE TABLE namespace_usage (
	namespace TEXT PRIMARY KEY,
	bytes     INTEGER NOT NULL
) WITHOUT ROWID;
`

// SQL expressions of what a row counts, in bytes (text as its UTF-8).
const (
	messageBytesSQL = `(length(CAST(content AS BLOB)) + length(CAST(metadata_json AS BLOB)))`
	stateBytesSQL   = `length(CAST(state_json AS BLOB))`
	namespaceSQL    = `CASE WHEN namespace = '' THEN '` + persistence.DefaultScopeNamespace + `' ELSE namespace END`
)

// addNamespaceUsageSQL adds ?2 bytes to namespace ?1's total;
// addSessionsUsageSQL adds those of ?1 (a JSON object of session id:
// bytes), each to its session's namespace, resolved here.
const (
	addNamespaceUsageSQL = `INSERT INTO namespace_usage (namespace, bytes) VALUES (?, ?)
ON CONFLICT (namespace) DO UPDATE SET bytes = bytes + excluded.bytes`
	addSessionsUsageSQL = `INSERT INTO namespace_usage (namespace, bytes)
SELECT ` + namespaceSQL + `, SUM(j.value) FROM json_each(?1) j JOIN sessions s ON s.session_id = j.key
WHERE true GROUP BY 1
ON CONFLICT (namespace) DO UPDATE SET bytes = bytes + excluded.bytes`
)

// recountSessionsSQL counts what the sessions' rows store, by namespace.
const recountSessionsSQL = `SELECT ` + namespaceSQL + `, SUM(x.n) FROM (
	SELECT session_id, ` + stateBytesSQL + ` AS n FROM sessions
	UNION ALL SELECT session_id, ` + messageBytesSQL + ` FROM message_rows
	UNION ALL SELECT session_id, length(data) FROM session_snapshots
) x JOIN sessions USING (session_id) GROUP BY 1`

// querier is a transaction or a connection.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// recountUsage counts what each namespace stores from the tables
// themselves. Scopes are counted here rather than in SQL because their
// namespace is parsed from their name (persistence.ScopeNamespace).
func recountUsage(ctx context.Context, q querier) (map[string]int64, error) {
	out := map[string]int64{}
	scan := func(query string, add func(key string, n int64)) error {
		rows, err := q.QueryContext(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var key string
			var n int64
			if err := rows.Scan(&key, &n); err != nil {
				return err
			}
			add(key, n)
		}
		return rows.Err()
	}
	if err := scan(recountSessionsSQL, func(ns string, n int64) { out[ns] += n }); err != nil {
		return nil, err
	}
	err := scan(`SELECT scope, `+stateBytesSQL+` FROM state_scopes`, func(scope string, n int64) {
		out[persistence.ScopeNamespace(scope)] += n
	})
	return out, err
}

// fillUsage writes the recount into the (empty) namespace_usage: the
// migration's second half.
func fillUsage(ctx context.Context, tx *sql.Tx) error {
	counts, err := recountUsage(ctx, tx)
	if err != nil {
		return err
	}
	for _, ns := range slices.Sorted(maps.Keys(counts)) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO namespace_usage (namespace, bytes) VALUES (?, ?)`, ns, counts[ns]); err != nil {
			return err
		}
	}
	return nil
}

// usageVersion is the schema version that created namespace_usage (its
// place in migrations, wherever that is).
func usageVersion() int { return slices.Index(migrations, usageMigration) + 1 }

// NamespaceBytes returns each namespace's running total of stored bytes
// and a recount from the tables, read in one transaction: they are equal
// unless the accounting is wrong (the conformance suite compares them).
func (s *Store) NamespaceBytes(ctx context.Context) (running, recount map[string]int64, err error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	running = map[string]int64{}
	rows, err := tx.QueryContext(ctx, `SELECT namespace, bytes FROM namespace_usage WHERE bytes != 0`)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var ns string
		var n int64
		if err := rows.Scan(&ns, &n); err != nil {
			rows.Close()
			return nil, nil, err
		}
		running[ns] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	recount, err = recountUsage(ctx, tx)
	for ns, n := range recount {
		if n == 0 {
			delete(recount, ns)
		}
	}
	return running, recount, err
}

// The applier is its ledger's persistence.UsageDialect.

func (a *applier) SessionNamespace(id string) (string, bool, error) {
	var ns string
	err := a.queryRow(`SELECT namespace FROM sessions WHERE session_id = ?`, id).Scan(&ns)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return ns, err == nil, err
}

func (a *applier) StoredBytes(ns string) (int64, error) {
	var n int64
	err := a.queryRow(`SELECT bytes FROM namespace_usage WHERE namespace = ?`, ns).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// flushUsage adds the transaction's deltas to the totals (before COMMIT):
// those booked by session (a replay's appends, truncations, snapshots) in one
// statement that finds their namespaces, then one statement per
// namespace.
func (a *applier) flushUsage() error {
	_, bySession := a.usage.Deltas()
	// A JSON object of plain ids (no byte to escape) and their bytes;
	// any other id is looked up on its own, so that no escaping can make
	// it another.
	buf := make([]byte, 0, 64*(len(bySession)+1))
	buf = append(buf, '{')
	for id, n := range bySession {
		if n == 0 {
			continue
		}
		if !plainJSON(id) {
			ns, ok, err := a.SessionNamespace(id)
			if err != nil {
				return err
			}
			if ok {
				a.usage.Learn(id, ns)
			}
			continue
		}
		if len(buf) > 1 {
			buf = append(buf, ',')
		}
		buf = append(buf, '"')
		buf = append(buf, id...)
		buf = append(buf, '"', ':')
		buf = strconv.AppendInt(buf, n, 10)
	}
	if len(buf) > 1 {
		if _, err := a.exec(addSessionsUsageSQL, string(append(buf, '}'))); err != nil {
			return err
		}
	}
	byNS, _ := a.usage.Deltas()
	for ns, n := range byNS {
		if n == 0 {
			continue
		}
		if _, err := a.exec(addNamespaceUsageSQL, ns, n); err != nil {
			return err
		}
	}
	return nil
}

// plainJSON reports whether s is a JSON string's content as it is: ASCII
// from space to tilde, without a quote or a backslash.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// bookDeleted books the removal of what query (one row: the bytes it
// selects) counts, before the statement that deletes it.
func (a *applier) bookDeleted(sessionID, query string, args ...any) error {
	var n int64
	if err := a.queryRow(query, args...).Scan(&n); err != nil {
		return err
	}
	a.usage.AddSession(sessionID, -n)
	return nil
}

// sessionNames caches the stored namespace of the sessions the writer's
// appends advance, so that an append's bytes are booked in its namespace
// without a lookup per transaction. An entry is only a guess: the advance
// matches the session only where the guess is its stored namespace, so a
// stale one (a session deleted and created again in another namespace by
// another process) fails the attempt, and the replay, which books by
// session and finds the namespace in the statement that adds the totals,
// forgets it. At most maxSessionNames entries; then it starts over.
type sessionNames struct{ m map[string]string }

const maxSessionNames = 1 << 16

// of is session id's namespace as stored ("" for a missing session, whose
// advance then matches no row anyway).
func (c *sessionNames) of(a *applier, id string) (string, error) {
	if ns, ok := c.m[id]; ok {
		return ns, nil
	}
	ns, ok, err := a.SessionNamespace(id)
	if err != nil || !ok {
		return "", err
	}
	if c.m == nil || len(c.m) >= maxSessionNames {
		c.m = make(map[string]string)
	}
	c.m[id] = ns
	return ns, nil
}

func (c *sessionNames) forget(id string) { delete(c.m, id) }
