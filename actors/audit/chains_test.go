package audit_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/audit/audittest"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/postgres"
	"github.com/agentstate/agentstate/persistence/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// chainTrail is a trail of 16 chains on PostgreSQL, with entries of many
// sessions spread over them, and a raw connection to tamper with it.
type chainTrail struct {
	st   *postgres.Store
	svc  *audit.Service
	conn *pgx.Conn
	// byChain lists each chain's entries in the chain's order.
	byChain map[int][]*auditv1.AuditEntry
}

func openChainTrail(t *testing.T) *chainTrail {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.Schema(t, "chains_")
	st, err := postgres.Open(ctx, oneChain(dsn), postgres.Unshared())
	if err != nil {
		t.Fatal(err)
	}
	// Entries before partitioning stay on chain 0.
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{})
	tr := &chainTrail{st: st, svc: svc, byChain: map[int][]*auditv1.AuditEntry{}}
	for i := range 3 {
		e := audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventResourceModified, Sync: true,
			SessionId: "before-" + strconv.Itoa(i)})
		tr.byChain[0] = append(tr.byChain[0], e)
	}
	if err := st.PartitionAudit(ctx, persistence.MaxAuditChains); err != nil {
		t.Fatal(err)
	}
	if tr.conn, err = pgx.Connect(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.conn.Close(context.Background()) })
	// The writer puts a transaction's entries on the first chain it can
	// lock: holding every other one sends each round to its chain.
	for i := range 160 {
		ch := 1 + i/20
		if i%20 == 0 {
			tr.exec(t, `SELECT pg_advisory_lock($1::int4, c) FROM generate_series(0, $2::int4 - 1) AS c WHERE c <> $3`,
				postgres.AuditLockClass, persistence.MaxAuditChains, ch)
		}
		e := audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventResourceModified, Sync: i%20 == 0,
			SessionId: "s-" + strconv.Itoa(i%40), DetailsJson: `{"i":` + strconv.Itoa(i) + `}`})
		tr.byChain[ch] = append(tr.byChain[ch], e)
		if i%20 == 19 {
			if _, err := svc.Flush(ctx, &auditv1.FlushRequest{}); err != nil {
				t.Fatal(err)
			}
			tr.exec(t, `SELECT pg_advisory_unlock_all()`)
		}
	}
	// A checkpoint names every chain's newest entry.
	if err := st.CheckpointAudit(ctx); err != nil {
		t.Fatal(err)
	}
	if len(tr.byChain) < 8 {
		t.Fatalf("entries on %d chains; want them spread", len(tr.byChain))
	}
	if v := audittest.MustVerify(t, svc); v.EntriesChecked != 163 {
		t.Fatalf("checked %d entries, want 163", v.EntriesChecked)
	}
	// Each chain's order is its commit order, which batching may make
	// differ from recording order: read it back.
	rows, err := tr.conn.Query(ctx, `SELECT chain, event_id, position, details_json FROM audit_log ORDER BY chain, position`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[int][]*auditv1.AuditEntry{}
	var chain int
	var e auditv1.AuditEntry
	if _, err := pgx.ForEachRow(rows, []any{&chain, &e.EventId, &e.Position, &e.DetailsJson}, func() error {
		stored[chain] = append(stored[chain], &auditv1.AuditEntry{EventId: e.EventId, Position: e.Position, DetailsJson: e.DetailsJson})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for ch, es := range tr.byChain {
		if len(stored[ch]) != len(es) {
			t.Fatalf("chain %d holds %d entries, want %d", ch, len(stored[ch]), len(es))
		}
	}
	tr.byChain = stored
	return tr
}

func (tr *chainTrail) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := tr.conn.Exec(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// broken checks that Verify fails at event (any when "") with a reason
// containing every one of want.
func (tr *chainTrail) broken(t *testing.T, event string, want ...string) {
	t.Helper()
	v, err := tr.svc.Verify(context.Background(), &auditv1.VerifyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Ok || event != "" && v.FirstBrokenEventId != event {
		t.Fatalf("verify = %v; want broken at %q", v, event)
	}
	for _, w := range want {
		if !strings.Contains(v.Reason, w) {
			t.Fatalf("verify reason %q; want it to name %q", v.Reason, w)
		}
	}
}

// busiest is the partitioned chain (not 0) with the most entries.
func (tr *chainTrail) busiest() int {
	best := 1
	for ch := 2; ch < persistence.MaxAuditChains; ch++ {
		if len(tr.byChain[ch]) > len(tr.byChain[best]) {
			best = ch
		}
	}
	return best
}

// Tampering with any one chain of a partitioned trail fails Verify naming
// the chain and the place; restoring passes again.
func TestVerifyDetectsTamperingPerChain(t *testing.T) {
	ch := 0
	t.Run("alter", func(t *testing.T) {
		tr := openChainTrail(t)
		ch = tr.busiest()
		victim := tr.byChain[ch][2]
		tr.exec(t, `UPDATE audit_log SET details_json = '{"forged":1}' WHERE event_id = $1`, victim.EventId)
		tr.broken(t, victim.EventId, "chain "+strconv.Itoa(ch)+" ", "hash does not match")
		tr.exec(t, `UPDATE audit_log SET details_json = $2 WHERE event_id = $1`, victim.EventId, victim.DetailsJson)
		audittest.MustVerify(t, tr.svc)
	})
	t.Run("alter a migrated entry", func(t *testing.T) {
		tr := openChainTrail(t)
		victim := tr.byChain[0][1]
		tr.exec(t, `UPDATE audit_log SET event_type = 'forged' WHERE event_id = $1`, victim.EventId)
		tr.broken(t, victim.EventId, "chain 0 ")
	})
	t.Run("delete", func(t *testing.T) {
		tr := openChainTrail(t)
		es := tr.byChain[tr.busiest()]
		tr.exec(t, `DELETE FROM audit_log WHERE event_id = $1`, es[1].EventId)
		tr.broken(t, es[2].EventId, "chain "+strconv.Itoa(tr.busiest())+" ", "prev_hash")
	})
	t.Run("delete the newest", func(t *testing.T) {
		tr := openChainTrail(t)
		es := tr.byChain[tr.busiest()]
		tr.exec(t, `DELETE FROM audit_log WHERE event_id = $1`, es[len(es)-1].EventId)
		tr.broken(t, es[len(es)-2].EventId, "chain "+strconv.Itoa(tr.busiest())+" ", "missing")
	})
	t.Run("reorder", func(t *testing.T) {
		tr := openChainTrail(t)
		es := tr.byChain[tr.busiest()]
		a, b := es[1], es[2]
		tr.exec(t, `UPDATE audit_log SET position = -1 WHERE event_id = $1`, a.EventId)
		tr.exec(t, `UPDATE audit_log SET position = $2 WHERE event_id = $1`, b.EventId, a.Position)
		tr.exec(t, `UPDATE audit_log SET position = $2 WHERE event_id = $1`, a.EventId, b.Position)
		tr.broken(t, b.EventId, "chain "+strconv.Itoa(tr.busiest())+" ", "at position "+strconv.FormatInt(a.Position, 10))
	})
	t.Run("move to another chain", func(t *testing.T) {
		tr := openChainTrail(t)
		es := tr.byChain[tr.busiest()]
		tr.exec(t, `UPDATE audit_log SET chain = 0 WHERE event_id = $1`, es[0].EventId)
		tr.broken(t, "", "chain ")
	})
	t.Run("drop a chain", func(t *testing.T) {
		tr := openChainTrail(t)
		ch := tr.busiest()
		tr.exec(t, `DELETE FROM audit_log WHERE chain = $1`, ch)
		tr.broken(t, "", "chain "+strconv.Itoa(ch)+" ", "missing")
	})
	t.Run("drop a chain's head", func(t *testing.T) {
		tr := openChainTrail(t)
		ch := tr.busiest()
		tr.exec(t, `DELETE FROM audit_chains WHERE chain = $1`, ch)
		tr.broken(t, "", "chain "+strconv.Itoa(ch)+" has ", "no head")
	})
	t.Run("drop a whole chain with its head", func(t *testing.T) {
		tr := openChainTrail(t)
		ch := tr.busiest()
		es := tr.byChain[ch]
		tr.exec(t, `DELETE FROM audit_log WHERE chain = $1`, ch)
		tr.exec(t, `DELETE FROM audit_chains WHERE chain = $1`, ch)
		tr.broken(t, "", "chain "+strconv.Itoa(ch)+" has no head", "position "+pos(es[len(es)-1]))
	})
	t.Run("drop the last chain with its head", func(t *testing.T) {
		tr := openChainTrail(t)
		last := persistence.MaxAuditChains - 1
		tr.exec(t, `DELETE FROM audit_log WHERE chain = $1`, last)
		tr.exec(t, `DELETE FROM audit_chains WHERE chain = $1`, last)
		tr.broken(t, "", "chain "+strconv.Itoa(last)+" has no head", "checkpoint")
	})
	t.Run("empty a chain and reset its head", func(t *testing.T) {
		tr := openChainTrail(t)
		ch := tr.busiest()
		es := tr.byChain[ch]
		tr.exec(t, `DELETE FROM audit_log WHERE chain = $1`, ch)
		tr.exec(t, `UPDATE audit_chains SET tail_position = 3, tail_hash = '' WHERE chain = $1`, ch)
		tr.broken(t, "", "chain "+strconv.Itoa(ch)+": its head is at position 3, behind", "position "+pos(es[len(es)-1]))
	})
	t.Run("cut a chain back and rewind its head", func(t *testing.T) {
		tr := openChainTrail(t)
		ch := tr.busiest()
		es := tr.byChain[ch]
		keep := es[len(es)-3]
		tr.exec(t, `DELETE FROM audit_log WHERE chain = $1 AND position > $2`, ch, keep.Position)
		tr.exec(t, `UPDATE audit_chains SET tail_position = $2, tail_hash = (SELECT hash FROM audit_log WHERE position = $2)
			WHERE chain = $1`, ch, keep.Position)
		tr.broken(t, "", "chain "+strconv.Itoa(ch)+": its head is at position "+pos(keep), "behind", pos(es[len(es)-1]))
	})
	t.Run("rewrite a chain with every later hash recomputed", func(t *testing.T) {
		tr := openChainTrail(t)
		ch := tr.busiest()
		tr.rewrite(t, ch, 1)
		// The first entry a checkpoint names past the rewrite: the last
		// one (named by the checkpoint written at the end), or one a
		// writer's periodic checkpoint named before.
		tr.broken(t, "", "chain "+strconv.Itoa(ch)+" at position ", "but checkpoint")
	})
	t.Run("alter the checkpoint", func(t *testing.T) {
		tr := openChainTrail(t)
		ch := tr.busiest()
		tr.exec(t, `UPDATE audit_checkpoints SET positions[$1] = positions[$1] - 1
			WHERE seq = (SELECT max(seq) FROM audit_checkpoints)`, ch+1)
		tr.broken(t, "", "checkpoint ", "digest does not match")
	})
	t.Run("delete a checkpoint between two", func(t *testing.T) {
		tr := openChainTrail(t)
		if err := tr.st.CheckpointAudit(context.Background()); err != nil {
			t.Fatal(err)
		}
		tr.exec(t, `DELETE FROM audit_checkpoints WHERE seq = (SELECT max(seq) - 1 FROM audit_checkpoints)`)
		tr.broken(t, "", "checkpoints ", "are missing")
	})
}

func pos(e *auditv1.AuditEntry) string { return strconv.FormatInt(e.Position, 10) }

// rewrite alters chain's entry i and recomputes every later hash of the
// chain and its head, as a writer of the database who knows the hash
// function could: the chain links again, and only a checkpoint naming
// its old head tells.
func (tr *chainTrail) rewrite(t *testing.T, chain, i int) {
	t.Helper()
	ctx := context.Background()
	es := tr.byChain[chain]
	prev := ""
	for k, stored := range es {
		e, err := tr.st.Reader().GetAudit(ctx, stored.EventId)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			prev = e.PrevHash
		}
		if k < i {
			prev = e.Hash
			continue
		}
		if k == i {
			e.DetailsJson = `{"forged":1}`
		}
		e.PrevHash, e.Hash = prev, persistence.AuditChainHash(prev, chain, e)
		tr.exec(t, `UPDATE audit_log SET details_json = $2, prev_hash = $3, hash = $4 WHERE event_id = $1`,
			e.EventId, e.DetailsJson, e.PrevHash, e.Hash)
		prev = e.Hash
	}
	tr.exec(t, `UPDATE audit_chains SET tail_hash = $2 WHERE chain = $1`, chain, prev)
}
