package audit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestRecordSyncIsDurableAndReadable(t *testing.T) {
	st, _ := openFile(t, "")
	svc := start(t, newSystem(t), st, writer.Config{})
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
	st, _ := openFile(t, "")
	svc := start(t, newSystem(t), st, writer.Config{})
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
	st, _ := openFile(t, "?synchronous=normal")
	svc := start(t, newSystem(t), st, writer.Config{})
	ctx := context.Background()
	var mine []string
	for i := range 30 {
		req := &auditv1.RecordRequest{EventType: audit.EventResourceModified, PlanId: "p-other", ActorName: "x"}
		if i%3 == 0 {
			req.PlanId, req.SessionId = "p-mine", "s1"
		}
		e := record(t, svc, req)
		if i%3 == 0 {
			mine = append(mine, e.EventId)
		}
	}
	record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged, ActorName: "y", Sync: true})

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

func TestGroupCommitBatchesPendingCommands(t *testing.T) {
	st, _ := openFile(t, "")
	g := gate(st)
	obs := &observer{}
	svc := start(t, newSystem(t), g, writer.Config{Observer: obs})
	ctx := context.Background()

	entered, release := g.hold()
	defer release()
	first := record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged})
	<-entered // the first transaction runs (held); everything below queues behind it
	const queued = 99
	for range queued {
		record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged})
	}
	flushed := make(chan error, 1)
	go func() {
		_, err := svc.Flush(ctx, &auditv1.FlushRequest{})
		flushed <- err
	}()
	select {
	case err := <-flushed:
		t.Fatalf("flush returned (%v) while a transaction before it was held", err)
	default:
	}
	release()
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	batches, _, _, _ := obs.snapshot()
	if len(batches) != 2 || batches[0] != 1 || batches[1] != queued {
		t.Fatalf("batches = %v, want [1 %d]: one transaction for everything queued meanwhile", batches, queued)
	}
	if g.applies() != 2 {
		t.Fatalf("%d transactions, want 2", g.applies())
	}
	all := listAll(t, svc, nil)
	if len(all) != queued+1 || all[0].EventId != first.EventId {
		t.Fatalf("stored %d entries, want %d starting with the first", len(all), queued+1)
	}
	mustVerify(t, svc)
}

func TestGroupCommitUnderConcurrentSyncSenders(t *testing.T) {
	st, _ := openFile(t, "")
	obs := &observer{}
	svc := start(t, newSystem(t), st, writer.Config{Observer: obs})
	const senders, each = 64, 20
	errc := make(chan error, senders)
	for range senders {
		go func() {
			for range each {
				if _, err := svc.Record(context.Background(), &auditv1.RecordRequest{EventType: audit.EventConfigChanged, Sync: true}); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range senders {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	batches, failures, _, _ := obs.snapshot()
	total := 0
	for _, b := range batches {
		total += b
	}
	if total != senders*each || failures != 0 {
		t.Fatalf("batches carried %d commands (%d failures), want %d", total, failures, senders*each)
	}
	mean := float64(total) / float64(len(batches))
	t.Logf("%d sync records in %d transactions (mean %.1f per transaction)", total, len(batches), mean)
	if mean <= 1 {
		t.Fatalf("mean batch %.2f: concurrent sync senders were not group-committed", mean)
	}
}

func TestFlushWithNothingPending(t *testing.T) {
	st, _ := openFile(t, "")
	svc := start(t, newSystem(t), st, writer.Config{})
	if _, err := svc.Flush(context.Background(), &auditv1.FlushRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestAsyncThenFlushIsDurable(t *testing.T) {
	st, _ := openFile(t, "")
	svc := start(t, newSystem(t), st, writer.Config{})
	var accepted []*auditv1.AuditEntry
	for range 500 {
		resp, err := svc.Record(context.Background(), &auditv1.RecordRequest{EventType: audit.EventPlanApplied, PlanId: "p"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Durable || resp.Entry.EventId == "" || resp.Entry.CreatedAt == nil {
			t.Fatalf("async answer %v: want durable=false with event_id and created_at", resp)
		}
		accepted = append(accepted, resp.Entry)
	}
	if _, err := svc.Flush(context.Background(), &auditv1.FlushRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, e := range accepted {
		if _, err := svc.Get(context.Background(), &auditv1.GetRequest{EventId: e.EventId}); err != nil {
			t.Fatalf("accepted %s, flushed, but: %v", e.EventId, err)
		}
	}
}

func TestBacklogBackPressure(t *testing.T) {
	st, _ := openFile(t, "")
	g := gate(st)
	svc := start(t, newSystem(t), g, writer.Config{Backlog: 4})
	ctx := context.Background()
	if svc.Writer().Backlog().Cap() != 4 {
		t.Fatalf("backlog capacity %d", svc.Writer().Backlog().Cap())
	}
	entered, release := g.hold()
	defer release()
	for range 4 {
		record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged})
	}
	<-entered
	if p := svc.Writer().Backlog().Pending(); p != 4 {
		t.Fatalf("pending = %d, want 4 (async records hold their slot until they commit)", p)
	}
	// A network sender is refused at once.
	_, err := svc.Record(writer.NoWait(ctx), &auditv1.RecordRequest{EventType: audit.EventConfigChanged})
	if !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("network sender on a full backlog: err = %v, want RESOURCE_EXHAUSTED", err)
	}
	if err := svc.Writer().Backlog().TryAcquire(1); !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("TryAcquire on a full backlog: %v", err)
	}
	// An in-process sender whose context ends while waiting: UNAVAILABLE.
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := svc.Record(short, &auditv1.RecordRequest{EventType: audit.EventConfigChanged}); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("cancelled in-process sender: err = %v, want UNAVAILABLE", err)
	}
	// An in-process sender waits, and gets through once slots free up.
	done := make(chan error, 1)
	go func() {
		_, err := svc.Record(ctx, &auditv1.RecordRequest{EventType: audit.EventConfigChanged, Sync: true})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("in-process sender did not wait on a full backlog: %v", err)
	default:
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Flush(ctx, &auditv1.FlushRequest{}); err != nil {
		t.Fatal(err)
	}
	if p := svc.Writer().Backlog().Pending(); p != 0 {
		t.Fatalf("pending after flush = %d, want 0", p)
	}
	if !writer.Waits(ctx) || writer.Waits(writer.NoWait(ctx)) {
		t.Fatal("Waits/NoWait")
	}
}

func TestStopDrainsEverythingAccepted(t *testing.T) {
	st, _ := openFile(t, "")
	g := gate(st)
	sys := newSystem(t)
	svc, err := startErr(sys, g, writer.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := g.hold()
	var accepted []string
	for range 300 {
		accepted = append(accepted, record(t, svc, &auditv1.RecordRequest{EventType: audit.EventEntityDeleted}).EventId)
	}
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- svc.Writer().Stop(context.Background()) }()
	// Stop refuses new work at once, while it drains.
	for {
		_, err := svc.Record(context.Background(), &auditv1.RecordRequest{EventType: audit.EventEntityDeleted})
		if errors.Is(err, errs.ErrUnavailable) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		accepted = append(accepted, "") // accepted before Stop marked the service
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned (%v) while a transaction was held", err)
		default:
		}
	}
	release()
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := svc.Writer().Stop(context.Background()); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	n, err := st.Reader().CountAudit(context.Background(), nil)
	if err != nil || n != int64(len(accepted)) {
		t.Fatalf("after stop %d entries stored (%v), want all %d accepted", n, err, len(accepted))
	}
	for _, id := range accepted {
		if id == "" {
			continue
		}
		if _, err := st.Reader().GetAudit(context.Background(), id); err != nil {
			t.Fatalf("accepted %s lost: %v", id, err)
		}
	}
	// The writer was released: the store hands it out again.
	w, err := st.Writer()
	if err != nil {
		t.Fatalf("writer after stop: %v", err)
	}
	w.Release()
	// After Stop every path answers UNAVAILABLE.
	if _, err := svc.Flush(context.Background(), &auditv1.FlushRequest{}); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("flush after stop: %v", err)
	}
	res, err := sys.Root.RequestFuture(svc.Writer().PID(), &writer.Submit{Cmd: &persistence.RecordAudit{}, Tag: 7}, 10*time.Second).Result()
	if a, ok := res.(*writer.Applied); err != nil || !ok || a.Tag != 7 || !errors.Is(a.Result.Err, errs.ErrUnavailable) {
		t.Fatalf("submit after stop: %v, %v", res, err)
	}
}

func TestSubmitCommitsStateChangeWithItsAuditEntry(t *testing.T) {
	st, _ := openFile(t, "")
	sys := newSystem(t)
	svc := start(t, sys, st, writer.Config{})
	sid := ids.New()
	e, err := audit.NewEntry(&auditv1.RecordRequest{EventType: audit.EventSessionCreated, SessionId: sid}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	now := timestamppb.Now()
	cmd := &persistence.CreateSession{
		Session: &sessionv1.Session{SessionId: sid, ActorName: "agent", State: sessionv1.SessionState_SESSION_STATE_ACTIVE,
			CreatedAt: now, UpdatedAt: now, MetadataJson: "{}"},
		Audit: []*auditv1.AuditEntry{e},
	}
	res, err := sys.Root.RequestFuture(svc.Writer().PID(), &writer.Submit{Cmd: cmd, Tag: 42}, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	a, ok := res.(*writer.Applied)
	if !ok || a.Tag != 42 || a.Result.Err != nil {
		t.Fatalf("reply %#v", res)
	}
	if _, err := st.Reader().GetSession(context.Background(), sid); err != nil {
		t.Fatalf("session not stored: %v", err)
	}
	got, err := svc.Get(context.Background(), &auditv1.GetRequest{EventId: e.EventId})
	if err != nil || got.Entry.SessionId != sid || got.Entry.Position == 0 {
		t.Fatalf("session_created entry: %v, %v", got, err)
	}
	// The same id again fails on its own, and stores nothing more.
	e2, _ := audit.NewEntry(&auditv1.RecordRequest{EventType: audit.EventSessionCreated, SessionId: sid}, time.Now())
	cmd.Audit = []*auditv1.AuditEntry{e2}
	res, _ = sys.Root.RequestFuture(svc.Writer().PID(), &writer.Submit{Cmd: cmd, Tag: 43}, 10*time.Second).Result()
	if a := res.(*writer.Applied); !errors.Is(a.Result.Err, errs.ErrAlreadyExists) {
		t.Fatalf("second create: %v", a.Result.Err)
	}
	if _, err := svc.Get(context.Background(), &auditv1.GetRequest{EventId: e2.EventId}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("audit entry of a failed command was stored: %v", err)
	}
}

func TestRemoteStyleRequests(t *testing.T) {
	st, _ := openFile(t, "")
	sys := newSystem(t)
	svc := start(t, sys, st, writer.Config{})
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

func TestStartRefusesASecondWriter(t *testing.T) {
	st, _ := openFile(t, "")
	sys := newSystem(t)
	start(t, sys, st, writer.Config{})
	if _, err := writer.Start(sys, st, writer.Config{Name: "writer-2", Logger: quiet}); !errors.Is(err, errs.ErrFailedPrecondition) {
		t.Fatalf("second Start on one store: %v, want FAILED_PRECONDITION (writer taken)", err)
	}
	st2, _ := openFile(t, "")
	if _, err := writer.Start(sys, st2, writer.Config{Logger: quiet}); !errors.Is(err, errs.ErrAlreadyExists) {
		t.Fatalf("second writer actor with the same name: %v", err)
	}
	w2, err := writer.Start(sys, st2, writer.Config{Name: "writer-2", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Start(sys, w2, st2.Reader(), audit.Config{}); !errors.Is(err, errs.ErrAlreadyExists) {
		t.Fatalf("second audit actor with the same name: %v", err)
	}
	if err := w2.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The failed Start gave the writer back.
	w, err := st2.Writer()
	if err != nil {
		t.Fatal(err)
	}
	w.Release()
}

// TestCallersCannotRecordAgentstateTypes: agentstate's own event types
// attest changes it made (a session_deleted for a session that never
// existed would be a forgery), so a caller's Record of one is
// INVALID_ARGUMENT and stores nothing, in process and as a remote request;
// agentstate's own writes of them (here Prune's audit_pruned) still commit.
func TestCallersCannotRecordAgentstateTypes(t *testing.T) {
	st, _ := openFile(t, "")
	sys := newSystem(t)
	svc := start(t, sys, st, writer.Config{})
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
