package audit_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/audit/audittest"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	_ "github.com/mattn/go-sqlite3" // the tamperer's own handle
	"google.golang.org/protobuf/types/known/timestamppb"
)

// tamperer is a second, independent handle on the database file: what an
// attacker with file access could do, bypassing the writer.
func tamperer(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	res, err := db.Exec(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s changed %d rows, want 1", q, n)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	st, path := audittest.OpenFile(t, "")
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{})
	var es []*auditv1.AuditEntry
	for i := range 2500 { // more than one verification chunk
		es = append(es, audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventResourceModified, Sync: i%500 == 0,
			DetailsJson: `{"i":` + strconv.Itoa(i) + `}`}))
	}
	if _, err := svc.Flush(context.Background(), &auditv1.FlushRequest{}); err != nil {
		t.Fatal(err)
	}
	if v := audittest.MustVerify(t, svc); v.EntriesChecked != 2500 {
		t.Fatalf("checked %d entries, want 2500", v.EntriesChecked)
	}
	db := tamperer(t, path)

	broken := func(want string) {
		t.Helper()
		v, err := svc.Verify(context.Background(), &auditv1.VerifyRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if v.Ok || v.FirstBrokenEventId != want {
			t.Fatalf("verify = %v, want broken at %s", v, want)
		}
	}

	// A changed field. (es holds what Record answered; an async answer
	// has no hash yet, so take the stored one.)
	got, err := svc.Get(context.Background(), &auditv1.GetRequest{EventId: es[1700].EventId})
	if err != nil {
		t.Fatal(err)
	}
	victim := got.Entry
	exec(t, db, `UPDATE audit_log SET details_json = '{"i":0}' WHERE event_id = ?`, victim.EventId)
	broken(victim.EventId)
	exec(t, db, `UPDATE audit_log SET details_json = ? WHERE event_id = ?`, `{"i":1700}`, victim.EventId)
	audittest.MustVerify(t, svc)

	// A changed field with its hash recomputed: the next link breaks.
	exec(t, db, `UPDATE audit_log SET actor_name = 'mallory', hash = 'f00d' WHERE event_id = ?`, victim.EventId)
	broken(victim.EventId)
	exec(t, db, `UPDATE audit_log SET actor_name = '', hash = ? WHERE event_id = ?`, victim.Hash, victim.EventId)
	audittest.MustVerify(t, svc)

	// A removed entry in the middle: its successor's link breaks.
	exec(t, db, `DELETE FROM audit_log WHERE event_id = ?`, es[42].EventId)
	broken(es[43].EventId)
}

func TestPruneRemovesAKnownSetAndKeepsTheChainVerifiable(t *testing.T) {
	st, path := audittest.OpenFile(t, "")
	const chunk = 7
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{}, audit.Config{PruneChunk: chunk})
	ctx := context.Background()
	var old, young []*auditv1.AuditEntry
	for range 50 {
		old = append(old, audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged}))
	}
	for range 20 {
		young = append(young, audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged, Sync: true}))
	}
	cut := young[0].CreatedAt.AsTime()
	if !old[len(old)-1].CreatedAt.AsTime().Before(cut) {
		t.Fatalf("clock did not advance between the sets (%v, %v)", old[len(old)-1].CreatedAt.AsTime(), cut)
	}
	resp, err := svc.Prune(ctx, &auditv1.PruneRequest{OlderThan: timestamppb.New(cut)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Removed != 50 {
		t.Fatalf("removed %d, want 50", resp.Removed)
	}
	for _, e := range old {
		if _, err := svc.Get(ctx, &auditv1.GetRequest{EventId: e.EventId}); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("pruned %s still there: %v", e.EventId, err)
		}
	}
	for _, e := range young {
		if _, err := svc.Get(ctx, &auditv1.GetRequest{EventId: e.EventId}); err != nil {
			t.Fatalf("young %s: %v", e.EventId, err)
		}
	}
	// Chunks of 7: 7 full ones and a last of 1, each with its audit_pruned entry.
	pruned := audittest.ListAll(t, svc, &auditv1.Filter{EventType: audit.EventAuditPruned})
	if len(pruned) != 8 {
		t.Fatalf("%d audit_pruned entries, want 8 (one per chunk)", len(pruned))
	}
	if v := audittest.MustVerify(t, svc); v.EntriesChecked != 20+8 {
		t.Fatalf("verified %d entries, want 28", v.EntriesChecked)
	}
	// Nothing older left: removes none.
	if resp, err := svc.Prune(ctx, &auditv1.PruneRequest{OlderThan: timestamppb.New(cut)}); err != nil || resp.Removed != 0 {
		t.Fatalf("second prune: %v, %v", resp, err)
	}
	// The first remaining entry is still tamper-evident after the prune.
	first := audittest.ListAll(t, svc, nil)[0]
	exec(t, tamperer(t, path), `UPDATE audit_log SET plan_id = 'x' WHERE event_id = ?`, first.EventId)
	if v, err := svc.Verify(ctx, &auditv1.VerifyRequest{}); err != nil || v.Ok || v.FirstBrokenEventId != first.EventId {
		t.Fatalf("tampered first entry after prune: %v, %v", v, err)
	}
}

func TestPruneInTheFutureMeansNow(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{}, audit.Config{PruneChunk: 5})
	for range 12 {
		audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged, Sync: true})
	}
	resp, err := svc.Prune(context.Background(), &auditv1.PruneRequest{OlderThan: timestamppb.New(time.Now().Add(24 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Removed != 12 {
		t.Fatalf("removed %d, want 12", resp.Removed)
	}
	// What remains is this prune's own record (chunks 5, 5, 2), chained
	// on the anchor.
	left := audittest.ListAll(t, svc, nil)
	if len(left) != 3 {
		t.Fatalf("%d entries left, want the 3 audit_pruned entries", len(left))
	}
	for _, e := range left {
		if e.EventType != audit.EventAuditPruned {
			t.Fatalf("left %s", e.EventType)
		}
	}
	audittest.MustVerify(t, svc)
}

// TestPruneBoundsFarInThePast: a bound before every entry, far outside the
// stores' nanosecond range (1600 once wrapped to 2184 and removed the whole
// trail) or Go's zero time, removes nothing; only an unset older_than is
// missing, and a timestamp invalid as protobuf is INVALID_ARGUMENT. Since
// and until filters far out either way mean what they say.
func TestPruneBoundsFarInThePast(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{}, audit.Config{PruneChunk: 5})
	ctx := context.Background()
	for range 7 {
		audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged, Sync: true})
	}
	for _, older := range []*timestamppb.Timestamp{
		timestamppb.New(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)),
		timestamppb.New(time.Time{}),
		timestamppb.New(time.Unix(0, math.MinInt64)),
	} {
		resp, err := svc.Prune(ctx, &auditv1.PruneRequest{OlderThan: older})
		if err != nil || resp.Removed != 0 {
			t.Fatalf("prune older than %v: %v, %v; want nothing removed", older.AsTime(), resp, err)
		}
	}
	if n := len(audittest.ListAll(t, svc, &auditv1.Filter{EventType: audit.EventConfigChanged})); n != 7 {
		t.Fatalf("%d entries left, want 7", n)
	}
	audittest.MustVerify(t, svc)
	for _, bad := range []*auditv1.PruneRequest{{}, {OlderThan: &timestamppb.Timestamp{Seconds: 253402300800}}} {
		if _, err := svc.Prune(ctx, bad); errs.CodeOf(err) != errs.InvalidArgumentCode {
			t.Fatalf("prune %v: %v; want INVALID_ARGUMENT", bad, err)
		}
	}

	y1600, y3000 := timestamppb.New(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)), timestamppb.New(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, c := range []struct {
		f    *auditv1.Filter
		want int64
	}{
		{&auditv1.Filter{EventType: audit.EventConfigChanged, Since: y1600}, 7},
		{&auditv1.Filter{EventType: audit.EventConfigChanged, Until: y3000}, 7},
		{&auditv1.Filter{EventType: audit.EventConfigChanged, Until: y1600}, 0},
		{&auditv1.Filter{EventType: audit.EventConfigChanged, Since: y3000}, 0},
	} {
		resp, err := svc.Count(ctx, &auditv1.CountRequest{Filter: c.f})
		if err != nil || resp.Count != c.want {
			t.Fatalf("count %v: %v, %v; want %d", c.f, resp, err, c.want)
		}
	}
}

// TestVerifyWhilePruning: a prune that removes entries while Verify walks
// must never make Verify report tampering.
func TestVerifyWhilePruning(t *testing.T) {
	st, _ := audittest.OpenFile(t, "?synchronous=normal")
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{}, audit.Config{PruneChunk: 50})
	ctx := context.Background()
	var es []*auditv1.AuditEntry
	for range 4000 {
		es = append(es, audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged}))
	}
	if _, err := svc.Flush(ctx, &auditv1.FlushRequest{}); err != nil {
		t.Fatal(err)
	}
	cut := es[3000].CreatedAt
	done := make(chan error, 1)
	go func() {
		_, err := svc.Prune(ctx, &auditv1.PruneRequest{OlderThan: cut})
		done <- err
	}()
	walks := 0
	for pruning := true; pruning; walks++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			pruning = false
		default:
		}
		v, err := svc.Verify(ctx, &auditv1.VerifyRequest{})
		if errors.Is(err, errs.ErrUnavailable) {
			continue // pruned under every attempt: allowed, never a false alarm
		}
		if err != nil {
			t.Fatal(err)
		}
		if !v.Ok {
			t.Fatalf("verify during prune reported %s broken: %s", v.FirstBrokenEventId, v.Reason)
		}
	}
	t.Logf("%d verifications during and after the prune", walks)
	if n, _ := svc.Count(ctx, &auditv1.CountRequest{Filter: &auditv1.Filter{EventType: audit.EventConfigChanged}}); n.Count != 1000 {
		t.Fatalf("%d left, want 1000", n.Count)
	}
}
