package audit_test

import (
	"context"
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
	"google.golang.org/protobuf/proto"
)

func idReq(id string, sync bool) *auditv1.RecordRequest {
	return &auditv1.RecordRequest{EventId: id, EventType: audit.EventConfigChanged, ActorName: "me",
		DetailsJson: `{"k": 1}`, Sync: sync}
}

// wantOnce checks that id is stored exactly once and the chain verifies.
func wantOnce(t *testing.T, svc *audit.Service, id string, total int) {
	t.Helper()
	n := 0
	all := audittest.ListAll(t, svc, nil)
	for _, e := range all {
		if e.EventId == id {
			n++
		}
	}
	if n != 1 || len(all) != total {
		t.Fatalf("event %s stored %d times (of %d entries), want once (of %d)", id, n, len(all), total)
	}
	audittest.MustVerify(t, svc)
}

func TestRecordRetryWithTheSameEventIDStoresNothing(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	svc := audittest.Start(t, audittest.NewSystem(t), st, writer.Config{})
	ctx := context.Background()
	id := ids.New()

	first, err := svc.Record(ctx, idReq(id, true))
	if err != nil || first.Duplicate || !first.Durable || first.Entry.EventId != id {
		t.Fatalf("first record: %v, %v", first, err)
	}
	for _, sync := range []bool{true, false} {
		again, err := svc.Record(ctx, idReq(id, sync))
		if err != nil {
			t.Fatalf("retry (sync=%v): %v", sync, err)
		}
		if !again.Duplicate || !again.Durable || !proto.Equal(again.Entry, first.Entry) {
			t.Fatalf("retry (sync=%v) answered %v, want the original %v as a duplicate", sync, again, first.Entry)
		}
	}
	for _, sync := range []bool{true, false} {
		other := idReq(id, sync)
		other.DetailsJson = `{"k": 2}`
		_, err := svc.Record(ctx, other)
		if errs.CodeOf(err) != errs.AlreadyExistsCode || !strings.Contains(err.Error(), id) {
			t.Fatalf("same id, other content (sync=%v): %v, want ALREADY_EXISTS naming %s", sync, err, id)
		}
	}
	if _, err := svc.Record(ctx, idReq("not-a-ulid", true)); errs.CodeOf(err) != errs.InvalidArgumentCode {
		t.Fatalf("bad event_id: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := svc.Flush(ctx, &auditv1.FlushRequest{}); err != nil {
		t.Fatal(err)
	}
	wantOnce(t, svc, id, 1)
}

// A retry that reaches the writer while its original still waits (an
// async original, or a sync one whose caller gave up) lands in the same
// transaction: it is answered as a duplicate, and stored once.
func TestRecordRetryInTheOriginalsBatchIsStoredOnce(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	g := audittest.Gate(st)
	svc := audittest.Start(t, audittest.NewSystem(t), g, writer.Config{})
	ctx := context.Background()

	entered, release := g.Hold()
	defer release()
	audittest.Record(t, svc, &auditv1.RecordRequest{EventType: audit.EventConfigChanged})
	<-entered // held: what follows queues into the next batch
	id := ids.New()
	if _, err := svc.Record(ctx, idReq(id, false)); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		resp *auditv1.RecordResponse
		err  error
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			resp, err := svc.Record(ctx, idReq(id, true))
			answers <- answer{resp, err}
		}()
	}
	waitQueued(t, svc, 4)
	release()
	var entry *auditv1.AuditEntry
	for range 2 {
		a := <-answers
		if a.err != nil || !a.resp.Duplicate || !a.resp.Durable {
			t.Fatalf("retry in the original's batch: %v, %v; want a durable duplicate", a.resp, a.err)
		}
		if entry != nil && !proto.Equal(entry, a.resp.Entry) {
			t.Fatalf("two retries answered with different originals: %v, %v", entry, a.resp.Entry)
		}
		entry = a.resp.Entry
	}
	wantOnce(t, svc, id, 2)
	if got, err := svc.Get(ctx, &auditv1.GetRequest{EventId: id}); err != nil || !proto.Equal(got.Entry, entry) {
		t.Fatalf("stored %v (%v), answered %v", got.GetEntry(), err, entry)
	}
}

// waitQueued polls until n records are pending at the writer (the backlog
// holds a slot per record until it is answered, the held one included),
// so that they share the next batch.
func waitQueued(t *testing.T, svc *audit.Service, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for svc.Writer().Backlog().Pending() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d records pending, want %d", svc.Writer().Backlog().Pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRemoteRecordRetryWithTheSameEventID(t *testing.T) {
	st, _ := audittest.OpenFile(t, "")
	sys := audittest.NewSystem(t)
	svc := audittest.Start(t, sys, st, writer.Config{})
	id := ids.New()
	ask := func(req *auditv1.RecordRequest) any {
		t.Helper()
		res, err := sys.Root.RequestFuture(svc.PID(), req, 10*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first, ok := ask(idReq(id, true)).(*auditv1.RecordResponse)
	if !ok || first.Duplicate {
		t.Fatalf("first: %v", first)
	}
	again, ok := ask(idReq(id, true)).(*auditv1.RecordResponse)
	if !ok || !again.Duplicate || !proto.Equal(again.Entry, first.Entry) {
		t.Fatalf("retry: %v", again)
	}
	other := idReq(id, true)
	other.ActorName = "someone else"
	if e, ok := ask(other).(*commonv1.Error); !ok || e.Code != errs.AlreadyExistsCode {
		t.Fatalf("other content: %v", e)
	}
	wantOnce(t, svc, id, 1)
}
