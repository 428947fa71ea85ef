package postgres

import (
	"context"
	"maps"
	"strings"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5"
)

type bytesQuota map[string]int64

func (q bytesQuota) Quota(ns string) persistence.Quota { return persistence.Quota{MaxBytes: q[ns]} }

// wantCounted checks that the store's running totals equal a recount and
// returns namespace ns's.
func wantCounted(t *testing.T, s *Store, ns string) int64 {
	t.Helper()
	running, recount, err := s.NamespaceBytes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(running, recount) {
		t.Fatalf("running totals %v, recount %v", running, recount)
	}
	return running[ns]
}

// Two members append to one namespace near its quota: the one whose check
// read the total before the other's commit finds the namespace past the
// quota when it adds its own, runs again, and is refused then; the total
// counts both members' writes and stays within the quota.
func TestBytesQuotaRaceOfTwoMembers(t *testing.T) {
	a, b := twoNodes(t)
	quota := bytesQuota{"n": 100}
	a.store.SetQuotas(quota)
	b.store.SetQuotas(quota)
	sa, sb := newSession("sa"), newSession("sb")
	a.ok(&persistence.CreateSession{Session: sa})
	b.ok(&persistence.CreateSession{Session: sb})
	// 2 + 2 bytes of state; each append adds 60 + 2.
	appendOf := func(id string) *persistence.AppendMessages {
		return &persistence.AppendMessages{SessionID: id, Turns: []persistence.Turn{{Messages: []*sessionv1.Message{message(strings.Repeat("x", 60))}}}}
	}
	raced := false
	a.store.afterCommand = func(int) {
		if raced {
			return
		}
		raced = true
		// a checked its append against 4 stored bytes; b's commit lands now.
		b.ok(appendOf("sb"))
	}
	res := a.apply(appendOf("sa"))[0]
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	tr := (&persistence.AppendMessages{}).ResultOf(res).Turns[0]
	if errs.CodeOf(tr.Err) != errs.FailedPreconditionCode || !strings.Contains(tr.Err.Error(), "100 stored bytes") {
		t.Fatalf("a's append after b's: %v, want the quota's refusal", tr.Err)
	}
	if a.store.retries == 0 {
		t.Fatal("a's transaction was not run again")
	}
	if got := wantCounted(t, a.store, "n"); got != 4+62 {
		t.Fatalf("namespace n stores %d bytes, want %d", got, 4+62)
	}
}

// The migration that adds the totals counts what an older build stored.
func TestMigrationCountsStoredBytes(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	before := usageVersion() - 1
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for v, m := range migrations[:before] {
		if _, err := conn.Exec(ctx, m); err != nil {
			t.Fatalf("migration %d: %v", v+1, err)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO schema_version (version) VALUES ($1)", v+1); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range []string{
		`INSERT INTO sessions (session_id, actor_name, namespace, automation, metadata_json, state, created_at, updated_at, state_json)
			VALUES ('s1', 'a', 'team-a', '', '{}', 1, 1, 1, '{"k":1}'), ('s2', 'a', '', '', '{}', 1, 1, 1, '{}')`,
		`INSERT INTO session_messages (session_id, sequence, message_id, role, content, metadata_json, created_at)
			VALUES ('s1', 0, 'm0', 1, 'hello', '{}', 1), ('s1', 1, 'm1', 1, 'héllo', '{"a":1}', 1), ('s2', 0, 'm2', 1, 'x', '{}', 1)`,
		`INSERT INTO session_snapshots (session_id, sequence, data, created_at) VALUES ('s1', 1, '\x010203', 1)`,
		`INSERT INTO state_scopes (scope, state_json, updated_at) VALUES ('app:team-a', '{"x":"y"}', 1), ('user:team%2Db/u', '{}', 1)`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	s := mustOpen(t, dsn, Unshared())
	// s1: 7 state + (5+2) + (6+7) + 3 snapshot; app:team-a 9.
	if got := wantCounted(t, s, "team-a"); got != 7+7+13+3+9 {
		t.Fatalf("team-a: %d bytes", got)
	}
	if got := wantCounted(t, s, persistence.DefaultScopeNamespace); got != 2+3 {
		t.Fatalf("the default namespace: %d bytes", got)
	}
	if got := wantCounted(t, s, "team-b"); got != 2 {
		t.Fatalf("team-b (an escaped scope name): %d bytes", got)
	}
}
