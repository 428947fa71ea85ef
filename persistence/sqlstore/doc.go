// Package sqlstore is what the SQL stores (persistence/sqlite and
// persistence/postgres) share above their dialects: the read side's
// statements and row decoding, the filters' WHERE clauses, and the
// lookups a writer makes inside its transaction. It is written once
// against DB, which each store implements with its placeholders, its
// driver's calls and its error mapping; what stays in a store is SQL that
// only it can run, its locking, schema and URL handling.
package sqlstore
