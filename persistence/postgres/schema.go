package postgres

import (
	"context"
	"fmt"

	"github.com/agentstate/agentstate/persistence/sqlstore"
	"github.com/jackc/pgx/v5"
)

// migrations are applied in order; migrations[i] brings the schema from
// version i to i+1. Append only: a released migration never changes.
//
// Tables are created unqualified, so they land in the first schema of the
// connection's search_path. Times are unix nanoseconds (bigint; timestamptz
// keeps only microseconds), 0 meaning unset; enums are their protobuf
// numbers. Identifiers that are ordered (session, plan, step and event ids)
// use the "C" collation, so their order is byte order whatever the
// database's locale, as in the SQLite store.
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE sessions (
	session_id    text COLLATE "C" PRIMARY KEY,
	actor_name    text NOT NULL,
	namespace     text NOT NULL,
	automation    text NOT NULL,
	metadata_json text NOT NULL,
	state         bigint NOT NULL,
	input_tokens  bigint NOT NULL DEFAULT 0,
	output_tokens bigint NOT NULL DEFAULT 0,
	cost          double precision NOT NULL DEFAULT 0,
	-- Invariant: next_sequence = max(sequence)+1 of the session's messages
	-- (0 when none) = its message count, because sequences are dense from
	-- 0. An append locks this row, checks it, and moves it.
	next_sequence bigint NOT NULL DEFAULT 0,
	created_at    bigint NOT NULL,
	updated_at    bigint NOT NULL,
	closed_at     bigint NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_actor ON sessions (actor_name, session_id);
CREATE INDEX sessions_by_namespace ON sessions (namespace, session_id);
CREATE INDEX sessions_by_state ON sessions (state, session_id);

CREATE TABLE session_messages (
	session_id    text COLLATE "C" NOT NULL REFERENCES sessions (session_id),
	sequence      bigint NOT NULL,
	message_id    text COLLATE "C" NOT NULL,
	role          bigint NOT NULL,
	content       text NOT NULL,
	metadata_json text NOT NULL,
	created_at    bigint NOT NULL,
	CONSTRAINT session_messages_sequence_key PRIMARY KEY (session_id, sequence),
	CONSTRAINT session_messages_message_id_key UNIQUE (session_id, message_id)
);

-- Links keep their insertion order (id) across upserts.
CREATE TABLE session_links (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	session_id text COLLATE "C" NOT NULL REFERENCES sessions (session_id),
	plan_id    text COLLATE "C" NOT NULL,
	phase      text NOT NULL,
	state      text NOT NULL,
	CONSTRAINT session_links_plan_key UNIQUE (session_id, plan_id)
);

CREATE TABLE plans (
	plan_id            text COLLATE "C" PRIMARY KEY,
	max_retries        bigint NOT NULL,
	error_details_json text NOT NULL
);

CREATE TABLE plan_step_retries (
	plan_id text COLLATE "C" NOT NULL REFERENCES plans (plan_id),
	phase   bigint NOT NULL,
	step_id text COLLATE "C" NOT NULL,
	count   bigint NOT NULL,
	PRIMARY KEY (plan_id, phase, step_id)
);

CREATE TABLE plan_errors (
	plan_id          text COLLATE "C" NOT NULL REFERENCES plans (plan_id),
	sequence         bigint NOT NULL,
	record_id        text COLLATE "C" NOT NULL,
	phase            bigint NOT NULL,
	step_id          text NOT NULL,
	error_type       text NOT NULL,
	message          text NOT NULL,
	tool             text NOT NULL,
	actor_name       text NOT NULL,
	stack_summary    text NOT NULL,
	attributes_json  text NOT NULL,
	category         bigint NOT NULL,
	is_retriable     boolean NOT NULL,
	retry_count      bigint NOT NULL,
	max_retries      bigint NOT NULL,
	recovery_action  bigint NOT NULL,
	recovery_hint    text NOT NULL,
	recovery_command text NOT NULL,
	recorded_at      bigint NOT NULL,
	CONSTRAINT plan_errors_sequence_key PRIMARY KEY (plan_id, sequence),
	CONSTRAINT plan_errors_record_id_key UNIQUE (record_id)
);
CREATE INDEX plan_errors_by_phase ON plan_errors (plan_id, phase, sequence);
CREATE INDEX plan_errors_by_category ON plan_errors (plan_id, category, sequence);

-- position is the commit order, assigned by the writer from audit_chain
-- (never reused, also after a prune). Each filter index ends in position so
-- that it also yields commit order; the optional columns are indexed only
-- where set, and queries repeat the index's WHERE.
CREATE TABLE audit_log (
	position      bigint PRIMARY KEY,
	event_id      text COLLATE "C" NOT NULL,
	event_type    text NOT NULL,
	plan_id       text NOT NULL,
	session_id    text NOT NULL,
	project_name  text NOT NULL,
	actor_name    text NOT NULL,
	user_identity text NOT NULL,
	details_json  text NOT NULL,
	created_at    bigint NOT NULL,
	prev_hash     text NOT NULL,
	hash          text NOT NULL,
	CONSTRAINT audit_log_event_id_key UNIQUE (event_id)
);
CREATE INDEX audit_by_type ON audit_log (event_type, position);
CREATE INDEX audit_by_plan ON audit_log (plan_id, position) WHERE plan_id <> '';
CREATE INDEX audit_by_session ON audit_log (session_id, position) WHERE session_id <> '';
CREATE INDEX audit_by_actor ON audit_log (actor_name, position) WHERE actor_name <> '';
CREATE INDEX audit_by_time ON audit_log (created_at);

-- The chain's one row. tail_* is the last entry ever committed (what the
-- next entry chains on); every transaction that writes audit entries locks
-- this row first (SELECT ... FOR UPDATE) and moves it before it commits, so
-- writers on every node append to one chain, one transaction at a time, in
-- commit order. anchor_* is the last pruned entry ('' and 0 before any
-- prune): what the first remaining entry chains on.
CREATE TABLE audit_chain (
	id              integer PRIMARY KEY CHECK (id = 1),
	tail_position   bigint NOT NULL,
	tail_hash       text NOT NULL,
	anchor_position bigint NOT NULL,
	anchor_hash     text NOT NULL
);
INSERT INTO audit_chain (id, tail_position, tail_hash, anchor_position, anchor_hash) VALUES (1, 0, '', 0, '');

-- Fencing (persistence.Activate): the current epoch of each session or plan
-- owner. A row with epoch 0 is a key that unfenced writes touched and no
-- owner has activated yet. Writers read their key's row FOR SHARE, so an
-- Activate (which updates it) waits for them to commit, and they for it.
CREATE TABLE owner_epochs (
	kind  smallint NOT NULL,
	id    text COLLATE "C" NOT NULL,
	epoch bigint NOT NULL,
	PRIMARY KEY (kind, id)
);
`,
	// 3: session state, shared scopes, client keys, event times,
	// truncation, the snapshot slot and expiry (issue 18); as the SQLite
	// store's migration 4.
	`
ALTER TABLE sessions ADD COLUMN state_json text NOT NULL DEFAULT '{}';
ALTER TABLE sessions ADD COLUMN client_key text NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN expires_at bigint NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN first_sequence bigint NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX sessions_by_client_key ON sessions(namespace, client_key) WHERE client_key <> '';
CREATE INDEX sessions_by_expiry ON sessions(expires_at) WHERE expires_at <> 0;
ALTER TABLE session_messages ADD COLUMN event_at bigint NOT NULL DEFAULT 0;
CREATE TABLE state_scopes (
	scope      text COLLATE "C" PRIMARY KEY,
	state_json text NOT NULL,
	updated_at bigint NOT NULL
);
CREATE TABLE session_snapshots (
	session_id text COLLATE "C" PRIMARY KEY REFERENCES sessions(session_id),
	sequence   bigint NOT NULL,
	data       bytea NOT NULL,
	created_at bigint NOT NULL
);
`,
	// 4 (issue 17, plan errors; separate from any other engineer's
	// migration): as in the SQLite store's plan_errors migration, the by-phase and
	// by-category indexes go. Every record paid two index entries for
	// them, while PlanHistory always names the plan, so a filtered read
	// walks that plan's records on the primary key (plan_id, sequence)
	// and keeps those of the phase or category: the same rows in the same
	// order. (The sequence check stays a condition of the INSERT here:
	// PostgreSQL does not materialize it.)
	`
DROP INDEX plan_errors_by_phase;
DROP INDEX plan_errors_by_category;
`,
	// 5 (issue 30, keyed items): as the SQLite store's migration 8. The
	// key is ordered by bytes ("C"), so a prefix is an index range; both
	// indexes are partial, so unkeyed messages add no entry.
	`
ALTER TABLE session_messages ADD COLUMN item_key text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE session_messages ADD COLUMN kind text COLLATE "C" NOT NULL DEFAULT '';
CREATE UNIQUE INDEX session_messages_by_key ON session_messages (session_id, item_key) WHERE item_key <> '';
CREATE INDEX session_messages_by_kind ON session_messages (session_id, kind, sequence) WHERE kind <> '';
`,
	// 6 (issue 28): who caused an entry and where it belongs; as the
	// SQLite store's migration 9.
	`
ALTER TABLE audit_log ADD COLUMN principal text NOT NULL DEFAULT '';
ALTER TABLE audit_log ADD COLUMN namespace text NOT NULL DEFAULT '';
UPDATE audit_log a SET namespace = COALESCE(
	(SELECT s.namespace FROM sessions s WHERE s.session_id = a.session_id AND s.namespace <> ''), 'local');
CREATE INDEX audit_by_principal ON audit_log (principal, position) WHERE principal <> '';
CREATE INDEX audit_by_namespace ON audit_log (namespace, position);
`,
	// (issue 28, after the audit migration above) The namespace index
	// holds only entries outside the default namespace; as the SQLite
	// store's migration after its audit one.
	`
DROP INDEX audit_by_namespace;
CREATE INDEX audit_by_namespace ON audit_log (namespace, position) WHERE namespace <> 'local';
`,
	// (issue 29, after the namespace index above) The trail partitioned
	// into chains (persistence.MaxAuditChains at most), each with its own
	// head row in audit_chains, which its writers lock (an advisory lock
	// per chain, lockorder.go) instead of the one audit_chain row. The
	// existing trail becomes chain 0 in place: its rows, positions and
	// hashes unchanged, its tail and anchor copied. Only chain 0 exists
	// until Store.PartitionAudit adds the others; a trail's chain count is
	// the number of its rows.
	`
ALTER TABLE audit_log ADD COLUMN chain smallint NOT NULL DEFAULT 0;
CREATE INDEX audit_by_chain ON audit_log (chain, position);
CREATE TABLE audit_chains (
	chain           smallint PRIMARY KEY CHECK (chain >= 0 AND chain < 16),
	tail_position   bigint NOT NULL,
	tail_hash       text NOT NULL,
	anchor_position bigint NOT NULL,
	anchor_hash     text NOT NULL
);
INSERT INTO audit_chains (chain, tail_position, tail_hash, anchor_position, anchor_hash)
	SELECT 0, tail_position, tail_hash, anchor_position, anchor_hash FROM audit_chain;
DROP TABLE audit_chain;
`,
	// (issue 30, after the namespace index above) Client keys are
	// ordered by bytes ("C"), so DeleteSessions' prefix is a range of
	// sessions_by_client_key (rebuilt by the change); equality, all other
	// uses make of a key, is the same under every deterministic collation.
	`
ALTER TABLE sessions ALTER COLUMN client_key TYPE text COLLATE "C";
`,
	// (issue 30, after the client-key collation above) As the SQLite
	// store's removed_message_ids.
	`
CREATE TABLE removed_message_ids (
	session_id text COLLATE "C" NOT NULL,
	message_id text COLLATE "C" NOT NULL,
	digest     text NOT NULL,
	PRIMARY KEY (session_id, message_id)
);
`,
	// (issue 29, after removed_message_ids above) Checkpoints of the
	// partitioned trail (persistence.AuditCheckpoint, checkpoint.go): each
	// row commits to every chain's head (positions[i], hashes[i] are
	// chain i's) and, through prev_digest, to the checkpoint before it.
	// The first one commits to the trail as migrated, so dropping a chain
	// of it is found from the start.
	`
CREATE TABLE audit_checkpoints (
	seq         bigint PRIMARY KEY,
	positions   bigint[] NOT NULL,
	hashes      text[] NOT NULL,
	prev_digest text NOT NULL,
	digest      text NOT NULL,
	created_at  bigint NOT NULL
);
INSERT INTO audit_checkpoints (seq, positions, hashes, prev_digest, digest, created_at)
SELECT 1, array_agg(tail_position ORDER BY chain), array_agg(tail_hash ORDER BY chain), '',
	encode(sha256(convert_to('agentstate audit checkpoint' || E'\n' || '1' || E'\n' || E'\n' ||
		string_agg(chain || ' ' || tail_position || ' ' || tail_hash || E'\n', '' ORDER BY chain), 'UTF8')), 'hex'),
	(extract(epoch FROM clock_timestamp()) * 1e9)::bigint
FROM audit_chains HAVING count(*) > 0;
`,
	// (issue 28, plan namespaces) As the SQLite store's: a plan is named
	// by (namespace, plan_id), and every plan stored before is in
	// "local". The keys and the foreign keys of the plan tables gain the
	// namespace (the sequence key keeps its name, which PlanWrite tells a
	// taken sequence by); record_id stays unique across all plans. The
	// column's default only fills the existing rows: every write names it.
	`
ALTER TABLE plan_step_retries DROP CONSTRAINT plan_step_retries_plan_id_fkey;
ALTER TABLE plan_errors DROP CONSTRAINT plan_errors_plan_id_fkey;
ALTER TABLE plans ADD COLUMN namespace text COLLATE "C" NOT NULL DEFAULT 'local';
ALTER TABLE plan_step_retries ADD COLUMN namespace text COLLATE "C" NOT NULL DEFAULT 'local';
ALTER TABLE plan_errors ADD COLUMN namespace text COLLATE "C" NOT NULL DEFAULT 'local';
ALTER TABLE plans DROP CONSTRAINT plans_pkey, ADD CONSTRAINT plans_pkey PRIMARY KEY (namespace, plan_id),
	ALTER COLUMN namespace DROP DEFAULT;
ALTER TABLE plan_step_retries DROP CONSTRAINT plan_step_retries_pkey,
	ADD CONSTRAINT plan_step_retries_pkey PRIMARY KEY (namespace, plan_id, phase, step_id),
	ADD CONSTRAINT plan_step_retries_plan_fkey FOREIGN KEY (namespace, plan_id) REFERENCES plans (namespace, plan_id),
	ALTER COLUMN namespace DROP DEFAULT;
ALTER TABLE plan_errors DROP CONSTRAINT plan_errors_sequence_key,
	ADD CONSTRAINT plan_errors_sequence_key PRIMARY KEY (namespace, plan_id, sequence),
	ADD CONSTRAINT plan_errors_plan_fkey FOREIGN KEY (namespace, plan_id) REFERENCES plans (namespace, plan_id),
	ALTER COLUMN namespace DROP DEFAULT;
`,
	// (issue 28, after removed_message_ids above) Each namespace's
	// running total of stored bytes (usage.go); migrate fills it from the
	// data in the same transaction.
	usageMigration,
	// (issue 29, after the totals above) The totals are split in shards,
	// one per writer, so that members adding to one namespace lock no
	// common row (usage.go); the totals counted so far become shard 0.
	usageShardsMigration,
}

// migrationLock is the pg_advisory_xact_lock key under which migrations
// run ("agentsta" in ASCII). It is database-wide, so migrations of every
// schema in the database serialize on it; they are rare.
const migrationLock int64 = 0x6167656e74737461

// migrate brings the schema to the latest version in one transaction that
// first takes migrationLock: openers in several processes serialize there,
// and the later ones find the version current, so each migration is applied
// exactly once per schema. schema_version has one row per applied version.
// It returns how many migrations it applied.
func migrate(ctx context.Context, conn *pgx.Conn) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, err
	}
	var version int
	if err := tx.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_version").Scan(&version); err != nil {
		return 0, err
	}
	applied, err := sqlstore.Migrate("schema", version, migrations, func(stmt string) error {
		_, err := tx.Exec(ctx, stmt)
		return err
	}, func(v int) error {
		_, err := tx.Exec(ctx, "INSERT INTO schema_version (version) VALUES ($1)", v)
		return err
	})
	if err != nil {
		return 0, err
	}
	if applied > 0 && version < usageVersion() {
		if err := fillUsage(ctx, tx); err != nil {
			return 0, fmt.Errorf("migration %d: count the stored bytes: %w", usageVersion(), err)
		}
	}
	return applied, tx.Commit(ctx)
}
