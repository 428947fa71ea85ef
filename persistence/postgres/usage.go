package postgres

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
)

// Stored bytes per namespace (persistence/usage.go says what counts), as
// in the SQLite store: namespace_usage holds each namespace's running
// total; the applier books every statement that stores or removes counted
// bytes in its ledger and adds the transaction's deltas in one statement,
// the last before COMMIT (addUsageSQL).
//
// Writers of several nodes share the totals. Adding to a total locks its
// row to commit, so concurrent transactions add in turn and none is lost;
// the statement is the last lock a transaction takes, and takes its rows
// in namespace order (lockorder.go). A check of a quota reads the
// committed total without a lock, so another node's commit may land
// between the check and the add: the add then finds the namespace past its
// quota (persistence.Usage.Overdrawn), and the transaction is run again
// (errUsageRace), its checks reading the new total.

// usageMigration creates namespace_usage; migrate then fills it
// (recountUsage) in the same transaction.
const usageMigration = `
CREATE TABLE namespace_usage (
	namespace text COLLATE "C" PRIMARY KEY,
	bytes     bigint NOT NULL
);
`

const (
	messageBytesSQL = `(octet_length(content) + octet_length(metadata_json))`
	namespaceSQL    = `CASE WHEN s.namespace = '' THEN '` + persistence.DefaultScopeNamespace + `' ELSE s.namespace END`
)

// addUsageSQL adds the deltas of ($1 session ids, $2 bytes), each
// resolved to its session's namespace here, and ($3 namespaces, $4
// bytes), locking the rows in namespace order, and answers the totals.
const addUsageSQL = `INSERT INTO namespace_usage (namespace, bytes)
SELECT x.ns, SUM(x.n)::bigint FROM (
	SELECT ` + namespaceSQL + `, d.n FROM unnest($1::text[], $2::bigint[]) AS d(id, n) JOIN sessions s ON s.session_id = d.id
	UNION ALL
	SELECT * FROM unnest($3::text[], $4::bigint[])
) AS x(ns, n) GROUP BY x.ns ORDER BY x.ns COLLATE "C"
ON CONFLICT (namespace) DO UPDATE SET bytes = namespace_usage.bytes + EXCLUDED.bytes
RETURNING namespace, bytes`

const recountSessionsSQL = `SELECT ` + namespaceSQL + `, SUM(x.n)::bigint FROM (
	SELECT session_id, octet_length(state_json)::bigint AS n FROM sessions
	UNION ALL SELECT session_id, ` + messageBytesSQL + ` FROM session_messages
	UNION ALL SELECT session_id, octet_length(data) FROM session_snapshots
) x JOIN sessions s ON s.session_id = x.session_id GROUP BY 1`

// errUsageRace is a transaction's failure when a namespace it added to
// was found past its quota: another writer's commit landed after its
// check. Not a command's error: Apply runs the transaction again.
var errUsageRace = errors.New("a namespace's stored bytes moved under the transaction's quota check; run again")

// rowQuerier is a transaction or a connection.
type rowQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// recountUsage counts what each namespace stores from the tables (scopes
// in Go: their namespace is parsed from their name).
func recountUsage(ctx context.Context, q rowQuerier) (map[string]int64, error) {
	out := map[string]int64{}
	scan := func(query string, add func(key string, n int64)) error {
		rows, err := q.Query(ctx, query)
		if err != nil {
			return err
		}
		var key string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&key, &n}, func() error {
			add(key, n)
			return nil
		})
		return err
	}
	if err := scan(recountSessionsSQL, func(ns string, n int64) { out[ns] += n }); err != nil {
		return nil, err
	}
	err := scan(`SELECT scope, octet_length(state_json)::bigint FROM state_scopes`, func(scope string, n int64) {
		out[persistence.ScopeNamespace(scope)] += n
	})
	return out, err
}

// fillUsage writes the recount into the (empty) namespace_usage.
func fillUsage(ctx context.Context, tx pgx.Tx) error {
	counts, err := recountUsage(ctx, tx)
	if err != nil {
		return err
	}
	for _, ns := range slices.Sorted(maps.Keys(counts)) {
		if _, err := tx.Exec(ctx, `INSERT INTO namespace_usage (namespace, bytes) VALUES ($1, $2)`, ns, counts[ns]); err != nil {
			return err
		}
	}
	return nil
}

// usageVersion is the schema version that created namespace_usage.
func usageVersion() int { return slices.Index(migrations, usageMigration) + 1 }

// NamespaceBytes returns each namespace's running total of stored bytes
// and a recount from the tables, read in one snapshot: they are equal
// unless the accounting is wrong (the conformance suite compares them).
func (s *Store) NamespaceBytes(ctx context.Context) (running, recount map[string]int64, err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	running = map[string]int64{}
	rows, err := tx.Query(ctx, `SELECT namespace, bytes FROM namespace_usage WHERE bytes <> 0`)
	if err != nil {
		return nil, nil, err
	}
	var ns string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&ns, &n}, func() error {
		running[ns] = n
		return nil
	}); err != nil {
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
	err := a.queryRow(`SELECT namespace FROM sessions WHERE session_id = $1`, []any{id}, &ns)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return ns, err == nil, err
}

func (a *applier) StoredBytes(ns string) (int64, error) {
	var n int64
	err := a.queryRow(`SELECT bytes FROM namespace_usage WHERE namespace = $1`, []any{ns}, &n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// queueUsage queues the add of the transaction's deltas to the totals,
// the last statement before COMMIT (finish sends it).
func (a *applier) queueUsage() {
	byNS, bySession := a.usage.Deltas()
	ids, idBytes := split(bySession)
	names, nsBytes := split(byNS)
	if len(ids) == 0 && len(names) == 0 {
		return
	}
	a.queue(addUsageSQL, ids, idBytes, names, nsBytes).Query(func(rows pgx.Rows) error {
		var ns string
		var total int64
		_, err := pgx.ForEachRow(rows, []any{&ns, &total}, func() error {
			if a.usage.Overdrawn(ns, total) {
				return errUsageRace
			}
			return nil
		})
		return err
	})
}

// split lists m's keys with nonzero values, sorted, and their values.
func split(m map[string]int64) ([]string, []int64) {
	var keys []string
	var ns []int64
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] != 0 {
			keys, ns = append(keys, k), append(ns, m[k])
		}
	}
	return keys, ns
}

// deleteCounted runs a DELETE … RETURNING the bytes of each row it
// removes (of session sessionID), books them, and returns how many rows
// went.
func (a *applier) deleteCounted(sessionID, del string, args ...any) (int64, error) {
	var n, bytes int64
	if err := a.queryRow(`WITH d AS (`+del+`) SELECT count(*), COALESCE(SUM(d.n), 0)::bigint FROM d`, args, &n, &bytes); err != nil {
		return 0, err
	}
	a.usage.AddSession(sessionID, -bytes)
	return n, nil
}
