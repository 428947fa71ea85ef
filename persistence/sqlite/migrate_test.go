package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A database written by an older build is brought up to date on open and
// keeps every row: here one at schema version 2, before session_messages
// was rebuilt with its message-id uniqueness keyed (message_id, session_id).
func TestMigrationKeepsMessagesOfAnOlderSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=1")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:2] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	session, msgIDs := ids.New(), make([]string, 5)
	// The rows as a build of schema 2 wrote them (today's statements
	// name later columns).
	if _, err := db.Exec(`INSERT INTO sessions (session_id, actor_name, namespace, automation, metadata_json,
	state, input_tokens, output_tokens, cost, next_sequence, created_at, updated_at, closed_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, session, "a", "local", 0, "{}", 1, 0, 0, 0.0, len(msgIDs), 1, 1, 0); err != nil {
		t.Fatal(err)
	}
	for i := range msgIDs {
		msgIDs[i] = ids.New()
		if _, err := db.Exec(`INSERT INTO session_messages (session_id, sequence, message_id, role, content,
	metadata_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`, session, i, msgIDs[i], 1, fmt.Sprint("m", i), "{}", 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("PRAGMA user_version = 2"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := mustOpen(t, path)
	defer mustClose(t, s)
	if got := s.MigrationRuns(); got != len(migrations)-2 {
		t.Fatalf("%d migrations ran, want %d", got, len(migrations)-2)
	}
	stored := storedMessages(t, s, session)
	if len(stored) != len(msgIDs) {
		t.Fatalf("%d messages after the migration, want %d", len(stored), len(msgIDs))
	}
	for i, m := range stored {
		if m.Sequence != int64(i) || m.MessageId != msgIDs[i] || m.Content != fmt.Sprint("m", i) {
			t.Fatalf("row %d after the migration: %v", i, m)
		}
	}
	// Migration 5 copies the stored messages settled (in the per-session
	// index), not pending.
	if settled, pending := rowKinds(t, s, session); settled != len(msgIDs) || pending != 0 {
		t.Fatalf("after the migration: %d settled and %d pending rows, want %d and 0", settled, pending, len(msgIDs))
	}
	// The rebuilt table still refuses a stored message id in its session:
	// a retried turn is answered as a duplicate, with the stored sequence.
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	retry := &sessionv1.Message{MessageId: msgIDs[2], Role: sessionv1.Role_ROLE_USER, Content: "m2", CreatedAt: timestamppb.Now()}
	res, err := w.Apply(context.Background(), []persistence.Command{&persistence.AppendMessages{SessionID: session,
		NextSequence: int64(len(msgIDs)), Turns: []persistence.Turn{{Messages: []*sessionv1.Message{retry}}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("retry: %v / %v", err, res[0].Err)
	}
	if tr := res[0].Turns[0]; !tr.Duplicate || tr.Messages[0].Sequence != 2 {
		t.Fatalf("retry of a migrated message: %+v, want the duplicate at sequence 2", tr)
	}
}
