package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
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

// A namespace cached wrongly for a session (as another process that
// deleted it and created it again in another namespace would leave it)
// fails the pooled append's advance; the replay stores the append, books
// its bytes in the session's stored namespace and forgets the guess.
func TestStaleSessionNamespaceIsReplayed(t *testing.T) {
	s := mustOpen(t, fmt.Sprintf("memory:stale-names-%s", ids.New()))
	defer mustClose(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	ctx := context.Background()
	now := timestamppb.Now()
	id := ids.New()
	if res, err := w.Apply(ctx, []persistence.Command{&persistence.CreateSession{Session: &sessionv1.Session{
		SessionId: id, ActorName: "a", Namespace: "right", CreatedAt: now, UpdatedAt: now}}}); err != nil || res[0].Err != nil {
		t.Fatalf("create: %v, %v", err, res)
	}
	appendOf := func(next int64) persistence.Command {
		return &persistence.AppendMessages{SessionID: id, NextSequence: next, Turns: []persistence.Turn{{Messages: []*sessionv1.Message{
			{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER, Content: "0123456789", CreatedAt: now}}}}}
	}
	if res, err := w.Apply(ctx, []persistence.Command{appendOf(0)}); err != nil || res[0].Err != nil {
		t.Fatalf("first append: %v, %v", err, res)
	}
	s.names.m[id] = "wrong"
	if res, err := w.Apply(ctx, []persistence.Command{appendOf(1)}); err != nil || res[0].Err != nil {
		t.Fatalf("append under a stale guess: %v, %v", err, res)
	}
	if ns, ok := s.names.m[id]; ok && ns != "right" {
		t.Fatalf("the stale guess %q stayed", ns)
	}
	running, recount, err := s.NamespaceBytes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"right": 2 + 2*12}; !maps.Equal(running, want) || !maps.Equal(recount, want) {
		t.Fatalf("running %v, recount %v, want %v", running, recount, want)
	}
}
