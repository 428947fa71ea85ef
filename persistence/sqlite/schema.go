package sqlite

// migrations are applied in order; migrations[i] brings the database from
// user_version i to i+1. Append only: a released migration never changes.
//
// Times are unix nanoseconds (INTEGER), so that range filters are integer
// comparisons; 0 means unset. Enums are their protobuf numbers.
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE sessions (
	session_id    TEXT PRIMARY KEY,
	actor_name    TEXT NOT NULL,
	namespace     TEXT NOT NULL,
	automation    TEXT NOT NULL,
	metadata_json TEXT NOT NULL,
	state         INTEGER NOT NULL,
	input_tokens  INTEGER NOT NULL DEFAULT 0,
	output_tokens INTEGER NOT NULL DEFAULT 0,
	cost          REAL NOT NULL DEFAULT 0,
	-- Invariant: next_sequence = max(sequence)+1 of the session's messages
	-- (0 when none) = its message count, because sequences are dense from
	-- 0. The writer keeps it in the same statement that checks an append.
	next_sequence INTEGER NOT NULL DEFAULT 0,
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	closed_at     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_actor ON sessions(actor_name, session_id);
CREATE INDEX sessions_by_namespace ON sessions(namespace, session_id);
CREATE INDEX sessions_by_state ON sessions(state, session_id);

-- Message order is (session_id, sequence).
CREATE TABLE session_messages (
	id            INTEGER PRIMARY KEY,
	session_id    TEXT NOT NULL REFERENCES sessions(session_id),
	sequence      INTEGER NOT NULL,
	message_id    TEXT NOT NULL,
	role          INTEGER NOT NULL,
	content       TEXT NOT NULL,
	metadata_json TEXT NOT NULL,
	created_at    INTEGER NOT NULL,
	UNIQUE (session_id, sequence),
	UNIQUE (session_id, message_id)
);

-- Links keep their insertion order (rowid) across upserts.
CREATE TABLE session_links (
	id         INTEGER PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions(session_id),
	plan_id    TEXT NOT NULL,
	phase      TEXT NOT NULL,
	state      TEXT NOT NULL,
	UNIQUE (session_id, plan_id)
);

CREATE TABLE plans (
	plan_id            TEXT PRIMARY KEY,
	max_retries        INTEGER NOT NULL,
	error_details_json TEXT NOT NULL
);

CREATE TABLE plan_step_retries (
	plan_id TEXT NOT NULL REFERENCES plans(plan_id),
	phase   INTEGER NOT NULL,
	step_id TEXT NOT NULL,
	count   INTEGER NOT NULL,
	PRIMARY KEY (plan_id, phase, step_id)
) WITHOUT ROWID;

CREATE TABLE plan_errors (
	id               INTEGER PRIMARY KEY,
	record_id        TEXT NOT NULL UNIQUE,
	plan_id          TEXT NOT NULL REFERENCES plans(plan_id),
	sequence         INTEGER NOT NULL,
	phase            INTEGER NOT NULL,
	step_id          TEXT NOT NULL,
	error_type       TEXT NOT NULL,
	message          TEXT NOT NULL,
	tool             TEXT NOT NULL,
	actor_name       TEXT NOT NULL,
	stack_summary    TEXT NOT NULL,
	attributes_json  TEXT NOT NULL,
	category         INTEGER NOT NULL,
	is_retriable     INTEGER NOT NULL,
	retry_count      INTEGER NOT NULL,
	max_retries      INTEGER NOT NULL,
	recovery_action  INTEGER NOT NULL,
	recovery_hint    TEXT NOT NULL,
	recovery_command TEXT NOT NULL,
	recorded_at      INTEGER NOT NULL,
	UNIQUE (plan_id, sequence)
);
CREATE INDEX plan_errors_by_phase ON plan_errors(plan_id, phase, sequence);
CREATE INDEX plan_errors_by_category ON plan_errors(plan_id, category, sequence);

-- position is the commit order, assigned by the writer (never reused, also
-- after a prune: the writer continues from audit_meta's anchor position).
-- An index on one column is ordered by (column, position) because SQLite
-- appends the rowid, so each filter index also yields commit order. The
-- optional columns are indexed only where set; queries repeat the index's
-- WHERE so the planner may use it.
CREATE TABLE audit_log (
	position      INTEGER PRIMARY KEY,
	event_id      TEXT NOT NULL UNIQUE,
	event_type    TEXT NOT NULL,
	plan_id       TEXT NOT NULL,
	session_id    TEXT NOT NULL,
	project_name  TEXT NOT NULL,
	actor_name    TEXT NOT NULL,
	user_identity TEXT NOT NULL,
	details_json  TEXT NOT NULL,
	created_at    INTEGER NOT NULL,
	prev_hash     TEXT NOT NULL,
	hash          TEXT NOT NULL
);
CREATE INDEX audit_by_type ON audit_log(event_type);
CREATE INDEX audit_by_plan ON audit_log(plan_id) WHERE plan_id != '';
CREATE INDEX audit_by_session ON audit_log(session_id) WHERE session_id != '';
CREATE INDEX audit_by_actor ON audit_log(actor_name) WHERE actor_name != '';
CREATE INDEX audit_by_time ON audit_log(created_at);

-- The chain's anchor: the hash and position of the last pruned entry.
CREATE TABLE audit_meta (
	id              INTEGER PRIMARY KEY CHECK (id = 1),
	anchor_hash     TEXT NOT NULL,
	anchor_position INTEGER NOT NULL
);
`,
	// 2: fencing epochs (persistence.Activate; see fencing.go).
	`
CREATE TABLE owners (
	kind  INTEGER NOT NULL,
	id    TEXT NOT NULL,
	epoch INTEGER NOT NULL,
	PRIMARY KEY (kind, id)
) WITHOUT ROWID;
`,
	// 3: the message-id uniqueness of session_messages is keyed
	// (message_id, session_id) instead of (session_id, message_id): the same
	// constraint, but message ids are ULIDs, so a transaction's new rows land
	// at the index's right edge rather than on one leaf page per session it
	// appends to. With dozens of sessions per group commit that halves the
	// pages each commit writes (docs/bench/HISTORY.md, Sessions). SQLite cannot
	// drop a table constraint, so the table is rebuilt.
	`
CREATE TABLE session_messages_v3 (
	id            INTEGER PRIMARY KEY,
	session_id    TEXT NOT NULL REFERENCES sessions(session_id),
	sequence      INTEGER NOT NULL,
	message_id    TEXT NOT NULL,
	role          INTEGER NOT NULL,
	content       TEXT NOT NULL,
	metadata_json TEXT NOT NULL,
	created_at    INTEGER NOT NULL,
	UNIQUE (session_id, sequence),
	UNIQUE (message_id, session_id)
);
INSERT INTO session_messages_v3 (id, session_id, sequence, message_id, role, content, metadata_json, created_at)
	SELECT id, session_id, sequence, message_id, role, content, metadata_json, created_at FROM session_messages;
DROP TABLE session_messages;
ALTER TABLE session_messages_v3 RENAME TO session_messages;
`,
	// 4: session state, shared scopes, client keys, event times,
	// truncation, the snapshot slot and expiry (issue 18). With truncation
	// next_sequence stays the stored maximum + 1 but is no longer the
	// count: the messages below first_sequence are gone. event_at is the
	// client's time of a message, 0 when it gave none (reads use
	// created_at then). The expiry and client-key indexes hold only the
	// sessions that have one.
	`
ALTER TABLE sessions ADD COLUMN state_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE sessions ADD COLUMN client_key TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN first_sequence INTEGER NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX sessions_by_client_key ON sessions(namespace, client_key) WHERE client_key != '';
CREATE INDEX sessions_by_expiry ON sessions(expires_at) WHERE expires_at != 0;
ALTER TABLE session_messages ADD COLUMN event_at INTEGER NOT NULL DEFAULT 0;
CREATE TABLE state_scopes (
	scope      TEXT PRIMARY KEY,
	state_json TEXT NOT NULL,
	updated_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE session_snapshots (
	session_id TEXT PRIMARY KEY REFERENCES sessions(session_id),
	sequence   INTEGER NOT NULL,
	data       BLOB NOT NULL,
	created_at INTEGER NOT NULL
) WITHOUT ROWID;
`,
	// 5 (issue 17, the "layout" change): messages leave the per-session
	// index out of the append path. A (session_id, sequence) index puts
	// every session a transaction appends to on a leaf of its own: at 64
	// sessions per group commit those leaves were ~80 of the ~90 pages
	// (WAL frames) each commit wrote. Rows are now stored in message_rows
	// with indexed = 0 ("pending"), where a small partial index of the
	// pending rows alone keeps them unique and findable (it spans a few
	// pages, shared by all sessions, because the writer settles it: once
	// settleRows rows are pending it sets indexed = 1 on all of them in the
	// same transaction, moving them into the full per-session index, which
	// then takes several rows per leaf). Reads go through the view
	// session_messages, which the planner runs as a merge of the two
	// indexes in sequence order (see settle in writer.go). The foreign
	// key to sessions goes: a partial index cannot serve SQLite's check on
	// a session's delete, which would scan every message; appends prove
	// their session in the same transaction (the compare-and-set on its
	// next_sequence) and a delete removes the messages first. SQLite
	// cannot drop a table constraint, so the table is rebuilt (as in 3).
	`
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
	UNIQUE (message_id, session_id)
);
INSERT INTO message_rows (id, session_id, sequence, message_id, role, content, metadata_json, created_at, event_at, indexed)
	SELECT id, session_id, sequence, message_id, role, content, metadata_json, created_at, event_at, 1 FROM session_messages;
DROP TABLE session_messages;
CREATE UNIQUE INDEX message_rows_by_sequence ON message_rows(session_id, sequence) WHERE indexed = 1;
CREATE UNIQUE INDEX message_rows_pending ON message_rows(session_id, sequence) WHERE indexed = 0;
CREATE VIEW session_messages AS
	SELECT id, session_id, sequence, message_id, role, content, metadata_json, created_at, event_at
		FROM message_rows WHERE indexed = 1
	UNION ALL
	SELECT id, session_id, sequence, message_id, role, content, metadata_json, created_at, event_at
		FROM message_rows WHERE indexed = 0;
`,
	// 6 (issue 17, plan errors): a record's sequence must continue its plan's — 0, or
	// after a stored sequence - 1 — and a trigger checks it. The check was
	// a condition of the INSERT (INSERT … SELECT … WHERE EXISTS), but an
	// INSERT whose SELECT reads the table it inserts into makes SQLite
	// materialize the row in an ephemeral table first, which cost more
	// than the rest of the insert. The trigger runs inside the INSERT's
	// own program: one index probe, no extra statement.
	//
	// And the by-phase and by-category indexes go: every record paid two
	// index entries (and at commit their leaf pages) for them, while
	// PlanHistory always names the plan, so a filtered read walks that
	// plan's records in sequence order on UNIQUE (plan_id, sequence) and
	// keeps those of the phase or category — the same rows in the same
	// order, reading one plan's records instead of the matching ones.
	`
DROP INDEX plan_errors_by_phase;
DROP INDEX plan_errors_by_category;
CREATE TRIGGER plan_errors_dense BEFORE INSERT ON plan_errors
WHEN NEW.sequence != 0 AND NOT EXISTS (
	SELECT 1 FROM plan_errors WHERE plan_id = NEW.plan_id AND sequence = NEW.sequence - 1)
BEGIN
	SELECT RAISE(ABORT, 'plan_errors: the sequence does not continue the plan');
END;
`,
	// 7 (issue 17, settling): the content rows stay where they were
	// inserted and the (session_id, sequence) order lives in two tables of
	// its own, message_index and message_pending — the partial indexes of
	// migration 5 as WITHOUT ROWID tables holding the row's id. Settling
	// was an UPDATE of indexed on every pending row: it rewrote the
	// content rows, and with them every table page the last 512 appends
	// filled (rows of many sessions share a page), to move ~40-byte index
	// entries. Now settling copies the pending entries into message_index
	// and empties message_pending (settleSQL in writer.go), and no content
	// page changes after its insert. message_rows.indexed stays as the
	// side a row's entry was inserted into: the triggers below put it
	// there in the INSERT's own program (one statement per row or per
	// multi-row chunk, as before), and take it out with the row, so every
	// delete on message_rows (truncate, delete, a turn's undo) reaches
	// both sides. (session_id, sequence) is unique within each table
	// (their keys) and across them because every append is the
	// compare-and-set of its session's next_sequence in the same
	// transaction (advance.go): a sequence is written once, below it.
	`
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
INSERT INTO message_index (session_id, sequence, id)
	SELECT session_id, sequence, id FROM message_rows WHERE indexed = 1 ORDER BY session_id, sequence;
INSERT INTO message_index (session_id, sequence, id)
	SELECT session_id, sequence, id FROM message_rows WHERE indexed = 0 ORDER BY session_id, sequence;
UPDATE message_rows SET indexed = 1 WHERE indexed = 0;
DROP VIEW session_messages;
DROP INDEX message_rows_by_sequence;
DROP INDEX message_rows_pending;
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
CREATE VIEW session_messages AS
	SELECT r.id AS id, i.session_id AS session_id, i.sequence AS sequence, r.message_id AS message_id,
		r.role AS role, r.content AS content, r.metadata_json AS metadata_json,
		r.created_at AS created_at, r.event_at AS event_at
		FROM message_index i JOIN message_rows r ON r.id = i.id
	UNION ALL
	SELECT r.id, p.session_id, p.sequence, r.message_id, r.role, r.content, r.metadata_json, r.created_at, r.event_at
		FROM message_pending p JOIN message_rows r ON r.id = p.id;
`,
	// 8 (issue 30, keyed items): a message's item key, unique in its
	// session, and its kind; '' when none, which every existing row gets.
	// Both indexes are partial, so a message without a key or kind adds
	// no entry and the append path of such messages is unchanged.
	// GetItem and a key-prefix page are a range of message_rows_by_key;
	// a kind page walks message_rows_by_kind in sequence order. The view
	// gains the columns (a view cannot be altered: it is recreated).
	`
ALTER TABLE message_rows ADD COLUMN item_key TEXT NOT NULL DEFAULT '';
ALTER TABLE message_rows ADD COLUMN kind TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX message_rows_by_key ON message_rows(session_id, item_key) WHERE item_key != '';
CREATE INDEX message_rows_by_kind ON message_rows(session_id, kind, sequence) WHERE kind != '';
DROP VIEW session_messages;
CREATE VIEW session_messages AS
	SELECT r.id AS id, i.session_id AS session_id, i.sequence AS sequence, r.message_id AS message_id,
		r.role AS role, r.content AS content, r.metadata_json AS metadata_json,
		r.created_at AS created_at, r.event_at AS event_at, r.item_key AS item_key, r.kind AS kind
		FROM message_index i JOIN message_rows r ON r.id = i.id
	UNION ALL
	SELECT r.id, p.session_id, p.sequence, r.message_id, r.role, r.content, r.metadata_json, r.created_at, r.event_at,
		r.item_key, r.kind
		FROM message_pending p JOIN message_rows r ON r.id = p.id;
`,
	// 9 (issue 28): who caused an entry and where it belongs. principal
	// is the authenticated principal (hashed with the entry, see
	// persistence.AuditCanonical); entries written before have none and
	// keep their hash. namespace is filled for them from their session
	// (else "local"), so reads filtered by namespace find them too; for
	// them it is derived, not covered by the hash. The namespace index
	// serves the reads of principals limited to some namespaces.
	`
ALTER TABLE audit_log ADD COLUMN principal TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_log ADD COLUMN namespace TEXT NOT NULL DEFAULT '';
UPDATE audit_log SET namespace = COALESCE(
	(SELECT s.namespace FROM sessions s WHERE s.session_id = audit_log.session_id AND s.namespace != ''), 'local');
CREATE INDEX audit_by_principal ON audit_log(principal) WHERE principal != '';
CREATE INDEX audit_by_namespace ON audit_log(namespace);
`,
	// (issue 28, after the audit migration above) The namespace index
	// holds only entries outside the default namespace, which a
	// single-tenant node's entries all are in: that node pays no index
	// entry per audit row (it cost 10-15% of a row's CPU), and a read of
	// the default namespace walks commit order, where nearly every row
	// matches (sqlstore's namespaceCond repeats the index's condition).
	`
DROP INDEX audit_by_namespace;
CREATE INDEX audit_by_namespace ON audit_log(namespace) WHERE namespace != 'local';
`,
	// (issue 30, after the namespace index above) The ids replacements
	// removed, with their content's digest (persistence/removedids.go):
	// written by ReplaceSuffix, deleted with the session.
	`
CREATE TABLE removed_message_ids (
	session_id TEXT NOT NULL,
	message_id TEXT NOT NULL,
	digest     TEXT NOT NULL,
	PRIMARY KEY (session_id, message_id)
) WITHOUT ROWID;
`,
	// (issue 28, plan namespaces) See planNamespaces.
	planNamespaces,
	// (issue 28, after removed_message_ids above) Each namespace's
	// running total of stored bytes (usage.go); migrate fills it from the
	// data in the same transaction.
	usageMigration,
}
