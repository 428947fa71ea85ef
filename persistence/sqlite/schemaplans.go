package sqlite

// planNamespaces is the migration of issue 28 that gives plans their
// namespace (in the migrations list, after the removed ids; like every
// migration, it never changes once released). A plan is named by
// (namespace, plan_id):
// the same plan id in two namespaces is two plans. The three plan
// tables are keyed by both, and every plan stored before is in the
// default namespace, "local". SQLite cannot change a table's key, so
// they are rebuilt (as in 3): the new tables are created under other
// names, filled, the old children and then the old plans table dropped
// (nothing references it by then, so its drop checks no foreign key),
// and the new ones renamed, which renames their references too. The
// dense-sequence trigger of 6 goes with plan_errors and is recreated on
// the plan's namespace and id. record_id stays unique across all plans.
const planNamespaces = `
CREATE TABLE plans_ns (
	namespace          TEXT NOT NULL,
	plan_id            TEXT NOT NULL,
	max_retries        INTEGER NOT NULL,
	error_details_json TEXT NOT NULL,
	PRIMARY KEY (namespace, plan_id)
);
CREATE TABLE plan_step_retries_ns (
	namespace TEXT NOT NULL,
	plan_id   TEXT NOT NULL,
	phase     INTEGER NOT NULL,
	step_id   TEXT NOT NULL,
	count     INTEGER NOT NULL,
	PRIMARY KEY (namespace, plan_id, phase, step_id),
	FOREIGN KEY (namespace, plan_id) REFERENCES plans_ns (namespace, plan_id)
) WITHOUT ROWID;
CREATE TABLE plan_errors_ns (
	id               INTEGER PRIMARY KEY,
	record_id        TEXT NOT NULL UNIQUE,
	namespace        TEXT NOT NULL,
	plan_id          TEXT NOT NULL,
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
	UNIQUE (namespace, plan_id, sequence),
	FOREIGN KEY (namespace, plan_id) REFERENCES plans_ns (namespace, plan_id)
);
INSERT INTO plans_ns (namespace, plan_id, max_retries, error_details_json)
	SELECT 'local', plan_id, max_retries, error_details_json FROM plans;
INSERT INTO plan_step_retries_ns (namespace, plan_id, phase, step_id, count)
	SELECT 'local', plan_id, phase, step_id, count FROM plan_step_retries;
INSERT INTO plan_errors_ns (id, record_id, namespace, plan_id, sequence, phase, step_id, error_type, message, tool,
	actor_name, stack_summary, attributes_json, category, is_retriable, retry_count, max_retries, recovery_action,
	recovery_hint, recovery_command, recorded_at)
	SELECT id, record_id, 'local', plan_id, sequence, phase, step_id, error_type, message, tool,
	actor_name, stack_summary, attributes_json, category, is_retriable, retry_count, max_retries, recovery_action,
	recovery_hint, recovery_command, recorded_at FROM plan_errors;
DROP TABLE plan_errors;
DROP TABLE plan_step_retries;
DROP TABLE plans;
ALTER TABLE plans_ns RENAME TO plans;
ALTER TABLE plan_step_retries_ns RENAME TO plan_step_retries;
ALTER TABLE plan_errors_ns RENAME TO plan_errors;
CREATE TRIGGER plan_errors_dense BEFORE INSERT ON plan_errors
WHEN NEW.sequence != 0 AND NOT EXISTS (
	SELECT 1 FROM plan_errors WHERE namespace = NEW.namespace AND plan_id = NEW.plan_id AND sequence = NEW.sequence - 1)
BEGIN
	SELECT RAISE(ABORT, 'plan_errors: the sequence does not continue the plan');
END;
`
