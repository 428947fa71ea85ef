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
// Writers of several nodes share the totals, so a namespace's total is
// split in shards: the sum of its rows, one per shard. Each writer adds to
// its own shard (usageshards.go: a shard no other live writer holds), so
// two members writing one namespace lock no common row, and their commits
// do not take turns. A check of a quota reads the committed sum without a
// lock, so another node's commit may land between the check and the add.
// So a transaction that adds to a namespace with a quota of stored bytes
// first takes that namespace's transaction lock (lockUsageSQL, held to
// commit: only such writers take turns, and only with each other), then
// adds and reads the sum, which now counts every other commit: past the
// quota (persistence.Usage.Overdrawn), the transaction is run again
// (errUsageRace), its checks reading the new sum. These are the last locks
// a transaction takes, in namespace order (lockorder.go).

// usageMigration creates namespace_usage; migrate then fills it
// (recountUsage) in the same transaction. usageShardsMigration splits it
// in shards, the totals so far in shard 0; how many shards writers use is
// theirs to choose (usageShards), a namespace's total sums whatever rows
// it has.
const (
	usageMigration = `
CREATE TABLE namespace_usage (
	namespace text COLLATE "C" PRIMARY KEY,
	bytes     bigint NOT NULL
);
`
	usageShardsMigration = `
ALTER TABLE namespace_usage ADD COLUMN shard smallint NOT NULL DEFAULT 0 CHECK (shard >= 0);
ALTER TABLE namespace_usage ALTER COLUMN shard DROP DEFAULT,
	DROP CONSTRAINT namespace_usage_pkey, ADD PRIMARY KEY (namespace, shard);
`
)

const (
	messageBytesSQL = `(octet_length(content) + octet_length(metadata_json))`
	namespaceSQL    = `CASE WHEN s.namespace = '' THEN '` + persistence.DefaultScopeNamespace + `' ELSE s.namespace END`
)

// addUsageSQL adds the deltas of ($1 session ids, $2 bytes), each
// resolved to its session's namespace here, and ($3 namespaces, $4
// bytes) to the writer's shard $5, locking its rows in namespace order.
const addUsageSQL = `INSERT INTO namespace_usage (namespace, shard, bytes)
SELECT x.ns, $5::smallint, SUM(x.n)::bigint FROM (
	SELECT ` + namespaceSQL + `, d.n FROM unnest($1::text[], $2::bigint[]) AS d(id, n) JOIN sessions s ON s.session_id = d.id
	UNION ALL
	SELECT * FROM unnest($3::text[], $4::bigint[])
) AS x(ns, n) GROUP BY x.ns ORDER BY x.ns COLLATE "C"
ON CONFLICT (namespace, shard) DO UPDATE SET bytes = namespace_usage.bytes + EXCLUDED.bytes`

// addSummedUsageSQL is addUsageSQL answering the sums of the namespaces
// $6: the shard as added, the others as committed when the statement
// began (after lockUsageSQL, so with every commit that could race).
const addSummedUsageSQL = `WITH up AS (` + addUsageSQL + `
RETURNING namespace, bytes)
SELECT up.namespace, up.bytes + COALESCE((SELECT SUM(o.bytes) FROM namespace_usage o
	WHERE o.namespace = up.namespace AND o.shard <> $5), 0)::bigint
FROM up WHERE up.namespace = ANY($6::text[])`

// lockUsageSQL takes the transaction locks of the namespaces $1, sorted
// in byte order (unnest keeps it), one after the other.
const lockUsageSQL = `SELECT pg_advisory_xact_lock(hashtextextended('agentstate.usage:' || ns, 0)) FROM unnest($1::text[]) AS ns`

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
		if _, err := tx.Exec(ctx, `INSERT INTO namespace_usage (namespace, shard, bytes) VALUES ($1, 0, $2)`, ns, counts[ns]); err != nil {
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
	rows, err := tx.Query(ctx, `SELECT namespace, SUM(bytes)::bigint FROM namespace_usage
		GROUP BY namespace HAVING SUM(bytes) <> 0`)
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
	err := a.queryRow(`SELECT COALESCE(SUM(bytes), 0)::bigint FROM namespace_usage WHERE namespace = $1`, []any{ns}, &n)
	return n, err
}

// queueUsage queues the add of the transaction's deltas to the writer's
// shard of the totals, the last statement before COMMIT (finish sends
// it), after the locks of the namespaces with a quota it adds to, whose
// sums it checks.
func (a *applier) queueUsage() error {
	bounded, err := a.usage.Bounded()
	if err != nil {
		return err
	}
	byNS, bySession := a.usage.Deltas()
	ids, idBytes := split(bySession)
	names, nsBytes := split(byNS)
	if len(ids) == 0 && len(names) == 0 {
		return nil
	}
	if len(bounded) == 0 {
		a.queue(addUsageSQL, ids, idBytes, names, nsBytes, a.shard)
		return nil
	}
	a.queue(lockUsageSQL, bounded)
	a.queue(addSummedUsageSQL, ids, idBytes, names, nsBytes, a.shard, bounded).Query(func(rows pgx.Rows) error {
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
	return nil
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
