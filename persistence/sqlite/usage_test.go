package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"testing"

	"github.com/agentstate/agentstate/persistence"
)

// The migration that adds the totals of stored bytes counts what an older
// build stored: messages, state and snapshots by their session's
// namespace, scopes by the namespace in their name.
func TestMigrationCountsStoredBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=1")
	if err != nil {
		t.Fatal(err)
	}
	before := usageVersion() - 1
	for _, m := range migrations[:before] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range []string{
		`INSERT INTO sessions (session_id, actor_name, namespace, automation, metadata_json, state, created_at, updated_at, state_json)
			VALUES ('s1', 'a', 'team-a', '', '{}', 1, 1, 1, '{"k":1}'), ('s2', 'a', '', '', '{}', 1, 1, 1, '{}')`,
		`INSERT INTO message_rows (session_id, sequence, message_id, role, content, metadata_json, created_at, indexed)
			VALUES ('s1', 0, 'm0', 1, 'hello', '{}', 1, 1), ('s1', 1, 'm1', 1, 'héllo', '{"a":1}', 1, 0), ('s2', 0, 'm2', 1, 'x', '{}', 1, 1)`,
		`INSERT INTO session_snapshots (session_id, sequence, data, created_at) VALUES ('s1', 1, x'010203', 1)`,
		`INSERT INTO state_scopes (scope, state_json, updated_at) VALUES ('app:team-a', '{"x":"y"}', 1), ('user:team%2Db/u', '{}', 1)`,
		fmt.Sprintf("PRAGMA user_version = %d", before),
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, path)
	defer mustClose(t, s)
	running, recount, err := s.NamespaceBytes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// s1: 7 state + (5+2) + (6+7) + 3 snapshot, app:team-a 9; s2: 2 + 3.
	want := map[string]int64{"team-a": 7 + 7 + 13 + 3 + 9, persistence.DefaultScopeNamespace: 2 + 3, "team-b": 2}
	if !maps.Equal(running, want) || !maps.Equal(recount, want) {
		t.Fatalf("after the migration: running %v, recount %v, want %v", running, recount, want)
	}
}
