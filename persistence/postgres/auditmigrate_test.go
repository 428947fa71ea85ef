package postgres

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence/storetest"
	"github.com/jackc/pgx/v5"
)

// The migration that adds principal and namespace keeps a trail written by
// an older build verifiable: its entries keep their hashes (no principal:
// the nine-field form), get their session's namespace (else the default
// one), and a new entry chains onto the old tail with both hashed.
func TestMigrationKeepsAnOldAuditChainVerifiable(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The schema an older build left: every migration before the one
	// that adds the principal.
	before := slices.IndexFunc(migrations, func(m string) bool { return strings.Contains(m, "ADD COLUMN principal") })
	if before < 1 {
		t.Fatal("no migration adds the principal")
	}
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
	session := ids.New()
	if _, err := conn.Exec(ctx, `INSERT INTO sessions (session_id, actor_name, namespace, automation, metadata_json, state, created_at, updated_at)
		VALUES ($1, 'a', 'team-a', '', '{}', 1, 1, 1)`, session); err != nil {
		t.Fatal(err)
	}
	old := storetest.OldAuditChain(session)
	for _, e := range old {
		if _, err := conn.Exec(ctx, `INSERT INTO audit_log (position, event_id, event_type, plan_id, session_id, project_name,
			actor_name, user_identity, details_json, created_at, prev_hash, hash) VALUES ($1, $2, $3, '', $4, '', $5, '', $6, $7, $8, $9)`,
			e.Position, e.EventId, e.EventType, e.SessionId, e.ActorName, e.DetailsJson, e.CreatedAt.AsTime().UnixNano(), e.PrevHash, e.Hash); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `UPDATE audit_chain SET tail_position = 2, tail_hash = $1`, old[1].Hash); err != nil {
		t.Fatal(err)
	}

	storetest.CheckMigratedAuditChain(t, mustOpen(t, dsn), old)
}
