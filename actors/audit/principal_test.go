package audit_test

import (
	"context"
	"testing"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/audit/audittest"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/postgres"
	"github.com/agentstate/agentstate/persistence/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// tamperStore is a store and a way around it to its rows: what an attacker
// with access to the database could do.
type tamperStore struct {
	name  string
	open  func(t *testing.T) (persistence.Store, func(t *testing.T, q string, args ...any))
	param func(i int) string
}

var tamperStores = []tamperStore{
	{name: "sqlite", param: func(int) string { return "?" }, open: func(t *testing.T) (persistence.Store, func(*testing.T, string, ...any)) {
		st, path := audittest.OpenFile(t, "")
		db := tamperer(t, path)
		return st, func(t *testing.T, q string, args ...any) { t.Helper(); exec(t, db, q, args...) }
	}},
	{name: "postgres", param: func(i int) string { return "$" + string(rune('0'+i)) }, open: func(t *testing.T) (persistence.Store, func(*testing.T, string, ...any)) {
		dsn := pgtest.Schema(t, "audit_")
		st, err := postgres.Open(context.Background(), dsn, postgres.Unshared())
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return st, func(t *testing.T, q string, args ...any) {
			t.Helper()
			tag, err := conn.Exec(context.Background(), q, args...)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if tag.RowsAffected() != 1 {
				t.Fatalf("%s changed %d rows, want 1", q, tag.RowsAffected())
			}
		}
	}},
}

// An entry's principal and namespace are part of its hashed content: on
// either store, changing or blanking the principal (or the namespace) of a
// stored entry fails Verify at that entry, and restoring it passes again.
// The principal is the one of the recording context, never the caller's
// self-declared actor_name.
func TestVerifyDetectsAnAlteredPrincipal(t *testing.T) {
	for _, ts := range tamperStores {
		t.Run(ts.name, func(t *testing.T) {
			st, tamper := ts.open(t)
			svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{})
			ctx := principal.With(context.Background(), "alice")
			var es []*auditv1.AuditEntry
			for range 5 {
				r, err := svc.Record(ctx, &auditv1.RecordRequest{EventType: audit.EventResourceModified, ActorName: "bob", Sync: true})
				if err != nil {
					t.Fatal(err)
				}
				es = append(es, r.Entry)
			}
			victim := es[2]
			if victim.Principal != "alice" || victim.Namespace != persistence.DefaultNamespace {
				t.Fatalf("recorded entry names principal %q namespace %q; want alice, %q", victim.Principal, victim.Namespace, persistence.DefaultNamespace)
			}
			audittest.MustVerify(t, svc)
			broken := func(what string) {
				t.Helper()
				v, err := svc.Verify(context.Background(), &auditv1.VerifyRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if v.Ok || v.FirstBrokenEventId != victim.EventId {
					t.Fatalf("%s: verify = %v, want broken at %s", what, v, victim.EventId)
				}
			}
			p1, p2 := ts.param(1), ts.param(2)
			for _, c := range []struct{ col, bad, good string }{
				{"principal", "mallory", "alice"},
				{"principal", "", "alice"},
				{"namespace", "b", persistence.DefaultNamespace},
			} {
				tamper(t, "UPDATE audit_log SET "+c.col+" = "+p1+" WHERE event_id = "+p2, c.bad, victim.EventId)
				broken(c.col + " = " + c.bad)
				tamper(t, "UPDATE audit_log SET "+c.col+" = "+p1+" WHERE event_id = "+p2, c.good, victim.EventId)
				audittest.MustVerify(t, svc)
			}
		})
	}
}
