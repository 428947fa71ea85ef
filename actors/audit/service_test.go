package audit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/audit/audittest"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestRecordSyncIsDurableAndReadable(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{})
	resp, err := svc.Record(context.Background(), &auditv1.RecordRequest{
		EventType: audit.EventAuthFailure, ActorName: "cli", UserIdentity: "bob", DetailsJson: `{"token":"abc","ip":"10.0.0.1"}`, Sync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Durable || resp.Entry.Position == 0 || resp.Entry.Hash == "" {
		t.Fatalf("sync record answered before commit: %v", resp)
	}
	// Answered after commit: a read on another connection sees it at once.
	got, err := svc.Get(context.Background(), &auditv1.GetRequest{EventId: resp.Entry.EventId})
	if err != nil {
		t.Fatal(err)
	}
	if got.Entry.DetailsJson != `{"token":"***","ip":"10.0.0.1"}` || got.Entry.UserIdentity != "bob" {
		t.Fatalf("stored entry %v", got.Entry)
	}
	if got.Entry.Hash != resp.Entry.Hash || !got.Entry.CreatedAt.AsTime().Equal(resp.Entry.CreatedAt.AsTime()) {
		t.Fatalf("stored %v, answered %v", got.Entry, resp.Entry)
	}
}

func TestRecordTypedErrorsStoreNothing(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{})
	for _, req := range []*auditv1.RecordRequest{
		{EventType: "no_such_event", Sync: true},
		{EventType: audit.EventConfigChanged, DetailsJson: `[]`, Sync: true},
		{EventType: audit.EventConfigChanged, DetailsJson: `"x"`},
	} {
		if _, err := svc.Record(context.Background(), req); !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("record %v: err = %v, want INVALID_ARGUMENT", req, err)
		}
	}
	if _, err := svc.Flush(context.Background(), &auditv1.FlushRequest{}); err != nil {
		t.Fatal(err)
	}
	n, err := svc.Count(context.Background(), &auditv1.CountRequest{})
	if err != nil || n.Count != 0 {
		t.Fatalf("count = %v, %v; want 0 stored", n, err)
	}
}

func TestReadsValidateAndFilter(t *testing.T) {
	st, _ := audittest.OpenFile(t, "?synchronous=normal")
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{})
	ctx := context.Background()
	var mine []string
	for i := range 30 {
		req := &auditv1.RecordRequest{EventType: audit.EventResourceModified, PlanId: "p-other", ActorName: "x"}
		if i%3 == 0 {
			req.PlanId, req.SessionId = "p-mine", "s1"
		}
		e := audittest.Record(t, svc, req)
		if i%3 == 0 {
			mine = append(mine, e.EventId)
		}
	}
	audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged, ActorName: "y", Sync: true})

	count := func(f *auditv1.Filter) int64 {
		resp, err := svc.Count(ctx, &auditv1.CountRequest{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	if got := count(nil); got != 31 {
		t.Fatalf("count all = %d, want 31", got)
	}
	if got := count(&auditv1.Filter{PlanId: "p-mine"}); got != 10 {
		t.Fatalf("count plan = %d, want 10", got)
	}
	if got := count(&auditv1.Filter{EventType: audit.EventConfigChanged, ActorName: "y"}); got != 1 {
		t.Fatalf("count type+actor = %d, want 1", got)
	}
	if got := count(&auditv1.Filter{SessionId: "s1", Until: timestamppb.New(time.Now().Add(time.Hour))}); got != 10 {
		t.Fatalf("count session before now = %d, want 10", got)
	}
	if got := count(&auditv1.Filter{Since: timestamppb.New(time.Now().Add(time.Hour))}); got != 0 {
		t.Fatalf("count in the future = %d, want 0", got)
	}

	// Paging with a cursor returns each match once, in commit order.
	var paged []string
	cursor := ""
	for pages := 0; ; pages++ {
		resp, err := svc.List(ctx, &auditv1.ListRequest{Filter: &auditv1.Filter{PlanId: "p-mine"}, AfterEventId: cursor, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.Entries {
			paged = append(paged, e.EventId)
		}
		if resp.NextCursor == "" {
			break
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		cursor = resp.NextCursor
	}
	if len(paged) != len(mine) {
		t.Fatalf("paged %d entries, want %d", len(paged), len(mine))
	}
	for i := range mine {
		if paged[i] != mine[i] {
			t.Fatalf("page order differs at %d: %s vs %s", i, paged[i], mine[i])
		}
	}

	bad := []error{}
	_, err := svc.List(ctx, &auditv1.ListRequest{Limit: audit.MaxListLimit + 1})
	bad = append(bad, err)
	_, err = svc.List(ctx, &auditv1.ListRequest{Limit: -1})
	bad = append(bad, err)
	_, err = svc.List(ctx, &auditv1.ListRequest{AfterEventId: "not-a-ulid"})
	bad = append(bad, err)
	_, err = svc.List(ctx, &auditv1.ListRequest{Filter: &auditv1.Filter{EventType: "nope"}})
	bad = append(bad, err)
	_, err = svc.Count(ctx, &auditv1.CountRequest{Filter: &auditv1.Filter{
		Since: timestamppb.New(time.Now()), Until: timestamppb.New(time.Now().Add(-time.Hour))}})
	bad = append(bad, err)
	_, err = svc.Get(ctx, &auditv1.GetRequest{EventId: "x"})
	bad = append(bad, err)
	_, err = svc.Prune(ctx, &auditv1.PruneRequest{})
	bad = append(bad, err)
	for i, err := range bad {
		if !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("bad request %d: err = %v, want INVALID_ARGUMENT", i, err)
		}
	}
	if _, err := svc.Get(ctx, &auditv1.GetRequest{EventId: ids.New()}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("get unknown: err = %v, want NOT_FOUND", err)
	}
	if resp, err := svc.List(ctx, &auditv1.ListRequest{}); err != nil || len(resp.Entries) != 31 || resp.NextCursor != "" {
		t.Errorf("default list: %d entries, cursor %q, %v", len(resp.GetEntries()), resp.GetNextCursor(), err)
	}
}

func TestRemoteStyleRequests(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	sys := audittest.NewSystem(t)
	svc := audittest.Start(t, sys, st, writer.Config{})
	ask := func(msg any) any {
		t.Helper()
		res, err := sys.Root.RequestFuture(svc.PID(), msg, 10*time.Second).Result()
		if err != nil {
			t.Fatalf("%T: %v", msg, err)
		}
		return res
	}
	rec, ok := ask(&auditv1.RecordRequest{EventType: audit.EventAuthSuccess, Sync: true}).(*auditv1.RecordResponse)
	if !ok || !rec.Durable {
		t.Fatalf("record reply %v", rec)
	}
	if e, ok := ask(&auditv1.RecordRequest{EventType: "bogus"}).(*commonv1.Error); !ok || e.Code != errs.InvalidArgumentCode {
		t.Fatalf("bad record reply %v", e)
	}
	if g, ok := ask(&auditv1.GetRequest{EventId: rec.Entry.EventId}).(*auditv1.GetResponse); !ok || g.Entry.Hash != rec.Entry.Hash {
		t.Fatalf("get reply %v", g)
	}
	if c, ok := ask(&auditv1.CountRequest{}).(*auditv1.CountResponse); !ok || c.Count != 1 {
		t.Fatalf("count reply %v", c)
	}
	if l, ok := ask(&auditv1.ListRequest{}).(*auditv1.ListResponse); !ok || len(l.Entries) != 1 {
		t.Fatalf("list reply %v", l)
	}
	if v, ok := ask(&auditv1.VerifyRequest{}).(*auditv1.VerifyResponse); !ok || !v.Ok || v.EntriesChecked != 1 {
		t.Fatalf("verify reply %v", v)
	}
	if _, ok := ask(&auditv1.FlushRequest{}).(*auditv1.FlushResponse); !ok {
		t.Fatal("flush reply")
	}
	if p, ok := ask(&auditv1.PruneRequest{OlderThan: timestamppb.New(time.Unix(0, 0))}).(*auditv1.PruneResponse); !ok || p.Removed != 0 {
		t.Fatalf("prune reply %v", p)
	}
}

// TestStartRefusesASecondAuditActor: the audit actor's name is taken
// once per actor system, and a refused Start leaves its writer running.
func TestStartRefusesASecondAuditActor(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	sys := audittest.NewSystem(t)
	audittest.Start(t, sys, st, writer.Config{})
	st2, _ := audittest.OpenFile(t, "")
	w2, err := writer.Start(sys, st2, writer.Config{Name: "writer-2", Logger: audittest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop(context.Background())
	if _, err := audit.Start(sys, w2, st2.Reader(), audit.Config{}); !errors.Is(err, errs.ErrAlreadyExists) {
		t.Fatalf("second audit actor with the same name: %v", err)
	}
	if err := w2.Flush(context.Background()); err != nil {
		t.Fatalf("the writer after the refused audit Start: %v", err)
	}
}

// TestCallersCannotRecordAgentstateTypes: agentstate's own event types
// attest changes it made (a session_deleted for a session that never
// existed would be a forgery), so a caller's Record of one is
// INVALID_ARGUMENT and stores nothing, in process and as a remote request;
// agentstate's own writes of them (here Prune's audit_pruned) still commit.
func TestCallersCannotRecordAgentstateTypes(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	sys := audittest.NewSystem(t)
	svc := audittest.Start(t, sys, st, writer.Config{})
	ctx := context.Background()
	n := 0
	for _, typ := range audit.EventTypes() {
		if !audit.ReservedEventType(typ) {
			continue
		}
		n++
		for _, sync := range []bool{true, false} {
			_, err := svc.Record(ctx, &auditv1.RecordRequest{EventType: typ, SessionId: "never-existed", Sync: sync})
			if !errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), "agentstate only") {
				t.Errorf("Record(%s, sync %v): err = %v, want INVALID_ARGUMENT saying agentstate writes it", typ, sync, err)
			}
		}
		res, err := sys.Root.RequestFuture(svc.PID(), &auditv1.RecordRequest{EventType: typ, Sync: true}, 10*time.Second).Result()
		if e, ok := res.(*commonv1.Error); err != nil || !ok || e.Code != errs.InvalidArgumentCode {
			t.Errorf("remote Record(%s): reply %v, %v; want INVALID_ARGUMENT", typ, res, err)
		}
	}
	for _, typ := range []string{audit.EventSessionDeleted, audit.EventAuditPruned, audit.EventMessageAppended} {
		if !audit.ReservedEventType(typ) {
			t.Errorf("%s is not reserved", typ)
		}
	}
	if n < 11 {
		t.Fatalf("only %d reserved types checked", n)
	}
	if _, err := svc.Record(ctx, &auditv1.RecordRequest{EventType: audit.EventConfigChanged, Sync: true}); err != nil {
		t.Fatalf("caller type: %v", err)
	}
	if _, err := svc.Prune(ctx, &auditv1.PruneRequest{OlderThan: timestamppb.New(time.Unix(0, 0))}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Flush(ctx, &auditv1.FlushRequest{}); err != nil {
		t.Fatal(err)
	}
	l, err := svc.List(ctx, &auditv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range l.Entries {
		types = append(types, e.EventType)
	}
	if strings.Join(types, ",") != audit.EventConfigChanged+","+audit.EventAuditPruned {
		t.Fatalf("stored %v; want only the caller's config_changed and agentstate's own audit_pruned", types)
	}
}
