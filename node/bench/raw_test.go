package bench

import (
	"database/sql"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/persistence/sqlite"
)

// messageObjects lists the tables, indexes and triggers of db's message
// rows (all but the sessions table and the store's read view), each as
// type, name and its SQL with the whitespace collapsed.
func messageObjects(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT type, name, COALESCE(sql, '') FROM sqlite_master
		WHERE tbl_name IN ('message_rows', 'message_index', 'message_pending') AND type != 'view'
		ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var typ, name, text string
		if err := rows.Scan(&typ, &name, &text); err != nil {
			t.Fatal(err)
		}
		out = append(out, typ+" "+name+": "+strings.Join(strings.Fields(text), " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The raw ceiling stores its rows in the store's own message tables: the
// same tables, keys, indexes and triggers as a store's database at the
// latest schema version, so the ratio to it compares like with like.
func TestRawSchemaIsTheStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	store, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	raw, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "raw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(rawSchema); err != nil {
		t.Fatal(err)
	}
	want, got := messageObjects(t, store), messageObjects(t, raw)
	if len(want) == 0 {
		t.Fatal("the store's database has no message tables")
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("raw schema differs from the store's:\nraw:   %q\nstore: %q", got, want)
	}
}
