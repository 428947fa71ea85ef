package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/storetest"
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
	cmd := &persistence.AppendMessages{SessionID: session,
		NextSequence: int64(len(msgIDs)), Turns: []persistence.Turn{{Messages: []*sessionv1.Message{retry}}}}
	res, err := w.Apply(context.Background(), []persistence.Command{cmd})
	if err != nil || res[0].Err != nil {
		t.Fatalf("retry: %v / %v", err, res[0].Err)
	}
	if tr := cmd.ResultOf(res[0]).Turns[0]; !tr.Duplicate || tr.Messages[0].Sequence != 2 {
		t.Fatalf("retry of a migrated message: %+v, want the duplicate at sequence 2", tr)
	}
}

// Migration 7 moves the order of a database's messages out of
// message_rows' partial indexes into message_index: every row of a
// database at version 6, settled or still pending, is read back in order,
// settled, and the stores' guards hold on it (a taken sequence is refused,
// a delete takes a row's entry with it).
func TestMigrationMovesSettledAndPendingRowsToTheIndexTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v6.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=1")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:6] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	// Two sessions as a build of schema 6 left them: a's first three rows
	// settled (indexed = 1) and two pending; b's two rows pending. The
	// rows are inserted out of sequence order, as interleaved sessions'
	// appends are.
	a, b := ids.New(), ids.New()
	for _, s := range []struct {
		id   string
		next int
	}{{a, 5}, {b, 2}} {
		if _, err := db.Exec(`INSERT INTO sessions (session_id, actor_name, namespace, automation, metadata_json,
			state, next_sequence, created_at, updated_at) VALUES (?, 'a', 'local', '', '{}', 1, ?, 1, 1)`, s.id, s.next); err != nil {
			t.Fatal(err)
		}
	}
	rows := []struct {
		session  string
		sequence int
		indexed  int
	}{{a, 0, 1}, {b, 0, 0}, {a, 1, 1}, {a, 2, 1}, {a, 3, 0}, {b, 1, 0}, {a, 4, 0}}
	for _, r := range rows {
		if _, err := db.Exec(`INSERT INTO message_rows (session_id, sequence, message_id, role, content,
			metadata_json, created_at, indexed) VALUES (?, ?, ?, 1, ?, '{}', 1, ?)`,
			r.session, r.sequence, ids.New(), fmt.Sprint(r.session, "/", r.sequence), r.indexed); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("PRAGMA user_version = 6"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := mustOpen(t, path)
	defer mustClose(t, s)
	if got := s.MigrationRuns(); got != len(migrations)-6 {
		t.Fatalf("%d migrations ran, want %d", got, len(migrations)-6)
	}
	s.wmu.Lock()
	pending := s.pending
	s.wmu.Unlock()
	if pending != 0 {
		t.Fatalf("%d rows counted pending after the migration, want 0", pending)
	}
	for _, c := range []struct {
		id string
		n  int
	}{{a, 5}, {b, 2}} {
		stored := storedMessages(t, s, c.id)
		if len(stored) != c.n {
			t.Fatalf("%d messages of a session after the migration, want %d", len(stored), c.n)
		}
		for i, m := range stored {
			if m.Sequence != int64(i) || m.Content != fmt.Sprint(c.id, "/", i) {
				t.Fatalf("message %d after the migration: %v", i, m)
			}
		}
		if settled, pending := rowKinds(t, s, c.id); settled != c.n || pending != 0 {
			t.Fatalf("after the migration: %d settled and %d pending rows, want %d and 0", settled, pending, c.n)
		}
	}
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	// A stale append at a migrated sequence stores nothing; one at the
	// next sequence is read after the migrated rows.
	stale := applyOK(t, w, &persistence.AppendMessages{SessionID: b, NextSequence: 1, UpdatedAt: time.Now(),
		Turns: []persistence.Turn{{Messages: []*sessionv1.Message{newMsg("late", timestamppb.Now())}}}})[0]
	if errs.CodeOf(stale.Err) != errs.FailedPreconditionCode {
		t.Fatalf("stale append over migrated rows: %v, want FAILED_PRECONDITION", stale.Err)
	}
	appendOne(t, w, b, 2, "after")
	if stored := storedMessages(t, s, b); len(stored) != 3 || stored[2].Content != "after" {
		t.Fatalf("after an append to a migrated session: %v", stored)
	}
	del := &persistence.DeleteSession{SessionID: a}
	res := applyOK(t, w, del)[0]
	if res.Err != nil || del.ResultOf(res).MessagesRemoved != 5 {
		t.Fatalf("delete of a migrated session: %+v", res)
	}
	var entries int
	if err := s.rdb.QueryRow(`SELECT (SELECT count(*) FROM message_index WHERE session_id = ?1)
		+ (SELECT count(*) FROM message_pending WHERE session_id = ?1)`, a).Scan(&entries); err != nil {
		t.Fatal(err)
	}
	if entries != 0 {
		t.Fatalf("%d index entries outlive their deleted rows", entries)
	}
}

// Migration 8 adds principal and namespace to the audit trail of a
// database at version 7: its entries keep their hashes (no principal: the
// nine-field form) and verify, get their session's namespace (else the
// default one), and a new entry chains onto the old tail with its
// principal and namespace hashed.
func TestMigrationKeepsAnOldAuditChainVerifiable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v7.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=1")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:7] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	session := ids.New()
	if _, err := db.Exec(`INSERT INTO sessions (session_id, actor_name, namespace, automation, metadata_json,
	state, input_tokens, output_tokens, cost, next_sequence, created_at, updated_at, closed_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, session, "a", "team-a", 0, "{}", 1, 0, 0, 0.0, 0, 1, 1, 0); err != nil {
		t.Fatal(err)
	}
	old := storetest.OldAuditChain(session)
	for _, e := range old {
		if _, err := db.Exec(`INSERT INTO audit_log (position, event_id, event_type, plan_id, session_id, project_name,
	actor_name, user_identity, details_json, created_at, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.Position, e.EventId, e.EventType, "", e.SessionId, "", e.ActorName, "", e.DetailsJson,
			e.CreatedAt.AsTime().UnixNano(), e.PrevHash, e.Hash); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("PRAGMA user_version = 7"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := mustOpen(t, path)
	defer mustClose(t, s)
	storetest.CheckMigratedAuditChain(t, s, old)
}

// The plan-namespace migration puts the plans of an older build in the
// default namespace (storetest.CheckMigratedPlans).
func TestMigrationPutsOldPlansInTheDefaultNamespace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plans.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=1")
	if err != nil {
		t.Fatal(err)
	}
	before := slices.IndexFunc(migrations, func(m string) bool { return strings.Contains(m, "CREATE TABLE plans_ns") })
	if before < 1 {
		t.Fatal("no migration gives plans a namespace")
	}
	for _, m := range migrations[:before] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`INSERT INTO plans (plan_id, max_retries, error_details_json) VALUES ('` + storetest.OldPlanID + `', 5, '{}')`,
		`INSERT INTO plan_step_retries (plan_id, phase, step_id, count) VALUES ('` + storetest.OldPlanID + `', 3, 's', 2)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range storetest.OldPlanRecordIDs {
		if _, err := db.Exec(`INSERT INTO plan_errors (record_id, plan_id, sequence, phase, step_id, error_type, message,
		tool, actor_name, stack_summary, attributes_json, category, is_retriable, retry_count, max_retries,
		recovery_action, recovery_hint, recovery_command, recorded_at)
		VALUES (?, ?, ?, 3, 's', 'E', '', '', '', '', '{}', 6, 0, 1, 5, 1, '', '', 1)`, id, storetest.OldPlanID, i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", before)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, path)
	defer mustClose(t, s)
	storetest.CheckMigratedPlans(t, s)
}
