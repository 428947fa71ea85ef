package postgres

import (
	"context"
	"maps"
	"slices"
	"strconv"
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
	dsn, conn := olderSchema(t, usageVersion()-1)
	ctx := context.Background()
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

func appendOf(id string, content string) *persistence.AppendMessages {
	return &persistence.AppendMessages{SessionID: id, Turns: []persistence.Turn{{Messages: []*sessionv1.Message{message(content)}}}}
}

// usageRows counts namespace ns's rows of the totals (its shards written).
func usageRows(t *testing.T, s *Store, ns string) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM namespace_usage WHERE namespace = $1`, ns).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Two members append to sessions of one namespace without a quota: while
// the first holds its transaction open after adding its bytes, the second
// adds its own and commits without waiting for any lock, for each adds to
// a shard of its own.
func TestWritersOfOneNamespaceShareNoLock(t *testing.T) {
	a, b := twoNodes(t)
	if a.store.shard == b.store.shard {
		t.Fatalf("both writers picked shard %d", a.store.shard)
	}
	a.ok(&persistence.CreateSession{Session: newSession("sa")})
	b.ok(&persistence.CreateSession{Session: newSession("sb")})
	reached, release := holdCommit(t, a)
	first := applyAsync(a, appendOf("sa", "first"))
	<-reached // a's bytes are added; its row locks are held until COMMIT
	got, waited := lockWaitOrDone(t, b.pid, applyAsync(b, appendOf("sb", "second")))
	release()
	if waited {
		t.Fatal("the second member waited for a lock of the first's open transaction")
	}
	if got.err != nil || got.res[0].Err != nil {
		t.Fatalf("the second member's append: %v %v", got.err, got.res)
	}
	if got := <-first; got.err != nil || got.res[0].Err != nil {
		t.Fatalf("the first member's append: %v %v", got.err, got.res)
	}
	if n := wantCounted(t, a.store, "n"); n != int64(2*(2+2)+len("first")+len("second")) {
		t.Fatalf("namespace n stores %d bytes", n)
	}
	if n := usageRows(t, a.store, "n"); n != 2 {
		t.Fatalf("namespace n has %d rows of totals, want one per writer", n)
	}
}

// Two members append to one namespace with a quota, both checks passing
// against what is committed: the second waits for the first's namespace
// lock until it commits, then finds the sum past the quota, runs again
// and is refused. Without the lock each would add to its own shard
// unseen by the other, and both commit.
func TestBytesQuotaWritersTakeTurns(t *testing.T) {
	a, b := twoNodes(t)
	quota := bytesQuota{"n": 100}
	a.store.SetQuotas(quota)
	b.store.SetQuotas(quota)
	a.ok(&persistence.CreateSession{Session: newSession("sa")})
	b.ok(&persistence.CreateSession{Session: newSession("sb")})
	// 2 + 2 bytes of state; each append adds 60 + 2.
	body := strings.Repeat("x", 60)
	reached, release := holdCommit(t, a)
	first := applyAsync(a, appendOf("sa", body))
	<-reached
	done := applyAsync(b, appendOf("sb", body))
	waitLockWait(t, b.pid, done)
	release()
	if got := <-first; got.err != nil || got.res[0].Err != nil {
		t.Fatalf("the first member's append: %v %v", got.err, got.res)
	}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	tr := (&persistence.AppendMessages{}).ResultOf(got.res[0]).Turns[0]
	if errs.CodeOf(tr.Err) != errs.FailedPreconditionCode {
		t.Fatalf("the second member's append: %v, want the quota's refusal", tr.Err)
	}
	if b.store.retries == 0 {
		t.Fatal("the second member's transaction was not run again")
	}
	if n := wantCounted(t, a.store, "n"); n != 4+62 {
		t.Fatalf("namespace n stores %d bytes, want %d", n, 4+62)
	}
}

// The migration that splits the totals in shards keeps them: each
// namespace's total so far is its shard 0.
func TestMigrationShardsTheTotals(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	s := mustOpen(t, dsn, Unshared())
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, store: s, w: w}
	n.ok(&persistence.CreateSession{Session: newSession("s1")})
	n.ok(appendOf("s1", "hello"))
	w.Release()
	s.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Back to the schema before the migration, the rows as it left them.
	version := slices.Index(migrations, usageShardsMigration) + 1
	for _, stmt := range []string{
		`DELETE FROM namespace_usage WHERE shard <> 0`,
		`ALTER TABLE namespace_usage DROP CONSTRAINT namespace_usage_pkey, DROP COLUMN shard, ADD PRIMARY KEY (namespace)`,
		`DELETE FROM schema_version WHERE version >= ` + strconv.Itoa(version),
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `UPDATE namespace_usage SET bytes = $1 WHERE namespace = 'n'`, 2+len("hello")+2); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dsn, Unshared())
	if got := s.MigrationRuns(); got != len(migrations)-version+1 {
		t.Fatalf("%d migrations run, want %d", got, len(migrations)-version+1)
	}
	if got := wantCounted(t, s, "n"); got != int64(2+len("hello")+2) {
		t.Fatalf("namespace n stores %d bytes", got)
	}
	var shard int
	if err := conn.QueryRow(ctx, `SELECT shard FROM namespace_usage WHERE namespace = 'n'`).Scan(&shard); err != nil || shard != 0 {
		t.Fatalf("the total went to shard %d (%v), want 0", shard, err)
	}
}
