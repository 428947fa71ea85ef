package writer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/audit/audittest"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestGroupCommitBatchesPendingCommands(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	g := audittest.Gate(st)
	obs := &audittest.Observer{}
	svc := audittest.Start(t, audittest.NewSystem(t), g, writer.Config{Observer: obs})
	ctx := context.Background()

	entered, release := g.Hold()
	defer release()
	first := audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged})
	<-entered // the first transaction runs (held); everything below queues behind it
	const queued = 99
	for range queued {
		audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged})
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
	batches, _, _, _ := obs.Snapshot()
	if len(batches) != 2 || batches[0] != 1 || batches[1] != queued {
		t.Fatalf("batches = %v, want [1 %d]: one transaction for everything queued meanwhile", batches, queued)
	}
	if g.Applies() != 2 {
		t.Fatalf("%d transactions, want 2", g.Applies())
	}
	all := audittest.ListAll(t, svc, nil)
	if len(all) != queued+1 || all[0].EventId != first.EventId {
		t.Fatalf("stored %d entries, want %d starting with the first", len(all), queued+1)
	}
	audittest.MustVerify(t, svc)
}

func TestGroupCommitUnderConcurrentSyncSenders(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	obs := &audittest.Observer{}
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{Observer: obs})
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
	batches, failures, _, _ := obs.Snapshot()
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
	st, _ := audittest.OpenFile(t, "")
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{})
	if _, err := svc.Flush(context.Background(), &auditv1.FlushRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestAsyncThenFlushIsDurable(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{})
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
	st, _ := audittest.OpenFile(t, "")
	g := audittest.Gate(st)
	svc := audittest.Start(t, audittest.NewSystem(t), g, writer.Config{Backlog: 4})
	ctx := context.Background()
	if svc.Writer().Backlog().Cap() != 4 {
		t.Fatalf("backlog capacity %d", svc.Writer().Backlog().Cap())
	}
	entered, release := g.Hold()
	defer release()
	for range 4 {
		audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged})
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
	st, _ := audittest.OpenFile(t, "")
	g := audittest.Gate(st)
	sys := audittest.NewSystem(t)
	svc, err := audittest.StartErr(sys, g, writer.Config{Logger: audittest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := g.Hold()
	var accepted []string
	for range 300 {
		accepted = append(accepted, audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventEntityDeleted}).EventId)
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
		accepted = append(accepted, "") // accepted before Stop marked the writer stopping
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
	st, _ := audittest.OpenFile(t, "")
	sys := audittest.NewSystem(t)
	svc := audittest.Start(t, sys, st, writer.Config{})
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

func TestStartRefusesASecondWriter(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	sys := audittest.NewSystem(t)
	audittest.Start(t, sys, st, writer.Config{})
	if _, err := writer.Start(sys, st, writer.Config{Name: "writer-2", Logger: audittest.Quiet}); !errors.Is(err, errs.ErrFailedPrecondition) {
		t.Fatalf("second Start on one store: %v, want FAILED_PRECONDITION (writer taken)", err)
	}
	st2, _ := audittest.OpenFile(t, "")
	if _, err := writer.Start(sys, st2, writer.Config{Logger: audittest.Quiet}); !errors.Is(err, errs.ErrAlreadyExists) {
		t.Fatalf("second writer actor with the same name: %v", err)
	}
	w2, err := writer.Start(sys, st2, writer.Config{Name: "writer-2", Logger: audittest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Stop gave the writer back.
	w, err := st2.Writer()
	if err != nil {
		t.Fatal(err)
	}
	w.Release()
}
