package plan_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/plan"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/protobuf/proto"
)

// withID is req with the client record id set.
func withID(req *planv1.RecordErrorRequest, id string) *planv1.RecordErrorRequest {
	req.RecordId = id
	return req
}

func recordResp(t *testing.T, svc *plan.Service, req *planv1.RecordErrorRequest) *planv1.RecordErrorResponse {
	t.Helper()
	resp, err := svc.RecordError(ctxT(t), req)
	if err != nil {
		t.Fatalf("RecordError(%v): %v", req, err)
	}
	return resp
}

// wantOriginal checks that resp answers a retry with the original record.
func wantOriginal(t *testing.T, what string, resp *planv1.RecordErrorResponse, orig *planv1.ErrorRecord) {
	t.Helper()
	if !resp.GetDuplicate() {
		t.Fatalf("%s: duplicate = false; want true", what)
	}
	if !proto.Equal(resp.GetRecord(), orig) {
		t.Fatalf("%s:\n got %v\nwant the original %v", what, resp.GetRecord(), orig)
	}
}

// errorAudits counts the plan's plan_error_recorded entries.
func errorAudits(t *testing.T, h *harness, planID string) int64 {
	t.Helper()
	n, err := h.store.Reader().CountAudit(ctxT(t), &auditv1.Filter{PlanId: planID, EventType: audit.EventPlanErrorRecorded})
	if err != nil {
		t.Fatalf("CountAudit: %v", err)
	}
	return n
}

// probe returns once the plan actor of planID has taken every Call the
// root sent it before: it answers an invalid request itself, in order.
func probe(t *testing.T, h *harness, planID string) {
	t.Helper()
	if _, err := directory.Ask(ctxT(t), h.sys.Root, h.svc.PID(), &planv1.RecordErrorRequest{PlanId: planID, ErrorType: "x"}); !isInvalid(err) {
		t.Fatalf("probe: %v; want INVALID_ARGUMENT", err)
	}
}

// A RecordError retried with its record_id — concurrently with the
// original (queued behind it and coalesced into its write), after it
// committed, and after the actor was passivated — is stored once; every
// retry is answered with the original record and bumps no counter and no
// sequence.
func TestRecordErrorRetryIsIdempotent(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	const p = "retried"
	record(t, h.svc, timeoutOn(p, execute, "s")) // sequence 0, a warm actor
	id := ids.New()

	// The original's write is held in the writer; two retries arrive
	// meanwhile and wait on it.
	entered, release := h.gate.armHold()
	first := make(chan directory.Reply, 1)
	go func() {
		resp, err := h.svc.RecordError(ctx, withID(timeoutOn(p, execute, "s"), id))
		first <- directory.Reply{Msg: resp, Err: err}
	}()
	<-entered
	retries := []directory.ChanReplier{make(directory.ChanReplier, 1), make(directory.ChanReplier, 1)}
	for _, ch := range retries {
		h.sys.Root.Send(h.svc.PID(), &directory.Call{Msg: withID(timeoutOn(p, execute, "s"), id), Replier: ch})
	}
	// The same id with another message, while the original is in flight,
	// is no retry of it.
	reuse := make(directory.ChanReplier, 1)
	changed := withID(timeoutOn(p, execute, "s"), id)
	changed.Message += " (changed)"
	h.sys.Root.Send(h.svc.PID(), &directory.Call{Msg: changed, Replier: reuse})
	probe(t, h, p)
	release()
	if r := <-reuse; errs.CodeOf(r.Err) != errs.AlreadyExistsCode {
		t.Fatalf("reused id with another message while in flight: %v, %v; want ALREADY_EXISTS", r.Msg, r.Err)
	}

	f := <-first
	if f.Err != nil {
		t.Fatalf("original: %v", f.Err)
	}
	orig := f.Msg.(*planv1.RecordErrorResponse)
	if orig.GetDuplicate() || orig.GetRecord().GetRecordId() != id || orig.GetRecord().GetSequence() != 1 ||
		orig.GetRecord().GetRetryCount() != 2 {
		t.Fatalf("original: %v; want record %s at sequence 1, retry_count 2, not a duplicate", orig, id)
	}
	for i, ch := range retries {
		r := <-ch
		if r.Err != nil {
			t.Fatalf("concurrent retry %d: %v", i, r.Err)
		}
		wantOriginal(t, "concurrent retry", r.Msg.(*planv1.RecordErrorResponse), orig.GetRecord())
	}

	// Concurrent retries from many goroutines after the commit.
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := h.svc.RecordError(ctx, withID(timeoutOn(p, execute, "s"), id))
			if err == nil && (!resp.GetDuplicate() || !proto.Equal(resp.GetRecord(), orig.GetRecord())) {
				err = errors.New("a later retry was not answered with the original: " + resp.String())
			}
			errc <- err
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}

	// After passivation the actor remembers nothing: the store answers.
	// A request reusing the id with other fields is no retry: refused,
	// before and after passivation, naming the id.
	other := withID(&planv1.RecordErrorRequest{PlanId: p, Phase: strategize, StepId: "t", ErrorType: "AuthError"}, id)
	for _, when := range []string{"remembered", "after passivation"} {
		if when != "remembered" {
			h.svc.PassivateAll()
			if a := h.svc.ActiveActors(); a != 0 {
				t.Fatalf("%d plan actors live after PassivateAll", a)
			}
		}
		_, err := h.svc.RecordError(ctx, other)
		if errs.CodeOf(err) != errs.AlreadyExistsCode || !strings.Contains(err.Error(), id) {
			t.Fatalf("%s: reused id with other fields: %v; want ALREADY_EXISTS naming %s", when, err, id)
		}
	}
	wantOriginal(t, "retry after passivation", recordResp(t, h.svc, withID(timeoutOn(p, execute, "s"), id)), orig.GetRecord())
	wantOriginal(t, "second retry after passivation", recordResp(t, h.svc, withID(timeoutOn(p, execute, "s"), id)), orig.GetRecord())

	// Nothing was bumped: the next error of the step is its third.
	next := record(t, h.svc, timeoutOn(p, execute, "s"))
	if next.GetSequence() != 2 || next.GetRetryCount() != 3 {
		t.Fatalf("next record: sequence %d retry_count %d; want 2 3", next.GetSequence(), next.GetRetryCount())
	}
	if recs := history(t, h.svc, p); len(recs) != 3 || !proto.Equal(recs[1], orig.GetRecord()) {
		t.Fatalf("history: %v", recs)
	}
	if n := errorAudits(t, h, p); n != 3 {
		t.Fatalf("%d plan_error_recorded entries; want 3", n)
	}
}

// A request reusing a record id the actor does not remember, with other
// content, rides in a write with new records: the store refuses the write,
// the reuse is ALREADY_EXISTS, and the new records are resent as if it
// had never come.
func TestReusedRecordIDInABatchIsRefused(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	const p = "reused"
	id := ids.New()
	recordResp(t, h.svc, withID(timeoutOn(p, execute, "s"), id)) // sequence 0, count 1
	h.svc.PassivateAll()
	record(t, h.svc, timeoutOn(p, execute, "s")) // a fresh actor: sequence 1, count 2

	entered, release := h.gate.armHold()
	held := make(chan error, 1)
	go func() {
		_, err := h.svc.RecordError(ctx, timeoutOn(p, execute, "s")) // sequence 2, count 3
		held <- err
	}()
	<-entered
	reuse, fresh := make(directory.ChanReplier, 1), make(directory.ChanReplier, 1)
	changed := withID(timeoutOn(p, execute, "s"), id)
	changed.StackSummary = "another stack"
	h.sys.Root.Send(h.svc.PID(), &directory.Call{Msg: changed, Replier: reuse})
	h.sys.Root.Send(h.svc.PID(), &directory.Call{Msg: timeoutOn(p, execute, "s"), Replier: fresh})
	probe(t, h, p)
	release()
	if err := <-held; err != nil {
		t.Fatalf("held write: %v", err)
	}
	if r := <-reuse; errs.CodeOf(r.Err) != errs.AlreadyExistsCode || !strings.Contains(r.Err.Error(), id) {
		t.Fatalf("reused id: %v, %v; want ALREADY_EXISTS naming %s", r.Msg, r.Err, id)
	}
	f := <-fresh
	if f.Err != nil {
		t.Fatalf("new record behind the reuse: %v", f.Err)
	}
	if rec := f.Msg.(*planv1.RecordErrorResponse).GetRecord(); rec.GetSequence() != 3 || rec.GetRetryCount() != 4 {
		t.Fatalf("new record: sequence %d retry_count %d; want 3 4", rec.GetSequence(), rec.GetRetryCount())
	}
	if recs := history(t, h.svc, p); len(recs) != 4 || recs[0].GetStackSummary() == "another stack" {
		t.Fatalf("history: %v", recs)
	}
}

// A retry the actor does not remember rides in a write with new records:
// the store refuses the write, the retry is answered with its original,
// and the new records are resent with the sequences and counts they would
// have had without the retry.
func TestForgottenRetryInABatchIsResolvedByTheStore(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	const p = "batched"
	id := ids.New()
	orig := recordResp(t, h.svc, withID(timeoutOn(p, execute, "s"), id)).GetRecord()
	h.svc.PassivateAll()
	record(t, h.svc, timeoutOn(p, execute, "s")) // a fresh actor: sequence 1, count 2

	entered, release := h.gate.armHold()
	held := make(chan error, 1)
	go func() {
		_, err := h.svc.RecordError(ctx, timeoutOn(p, execute, "s")) // sequence 2, count 3
		held <- err
	}()
	<-entered
	retry, fresh := make(directory.ChanReplier, 1), make(directory.ChanReplier, 1)
	h.sys.Root.Send(h.svc.PID(), &directory.Call{Msg: withID(timeoutOn(p, execute, "s"), id), Replier: retry})
	h.sys.Root.Send(h.svc.PID(), &directory.Call{Msg: timeoutOn(p, execute, "s"), Replier: fresh})
	probe(t, h, p)
	release()
	if err := <-held; err != nil {
		t.Fatalf("held write: %v", err)
	}
	r := <-retry
	if r.Err != nil {
		t.Fatalf("retry: %v", r.Err)
	}
	wantOriginal(t, "retry", r.Msg.(*planv1.RecordErrorResponse), orig)
	f := <-fresh
	if f.Err != nil {
		t.Fatalf("new record behind the retry: %v", f.Err)
	}
	if rec := f.Msg.(*planv1.RecordErrorResponse).GetRecord(); rec.GetSequence() != 3 || rec.GetRetryCount() != 4 {
		t.Fatalf("new record: sequence %d retry_count %d; want 3 4", rec.GetSequence(), rec.GetRetryCount())
	}
	recs := history(t, h.svc, p)
	if len(recs) != 4 {
		t.Fatalf("%d records; want 4", len(recs))
	}
	for i, rec := range recs {
		if rec.GetSequence() != int64(i) || rec.GetRetryCount() != int32(i+1) {
			t.Fatalf("record %d: sequence %d retry_count %d", i, rec.GetSequence(), rec.GetRetryCount())
		}
	}
	if n := errorAudits(t, h, p); n != 4 {
		t.Fatalf("%d plan_error_recorded entries; want 4", n)
	}
}

// A record id names one record of one plan: used for another plan it is
// ALREADY_EXISTS, stores nothing there, and a new record that shared the
// refused write is stored as if the conflict had not been there.
func TestRecordIDOfAnotherPlan(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	id := ids.New()
	record(t, h.svc, withID(timeoutOn("first", execute, "s"), id))

	record(t, h.svc, timeoutOn("second", execute, "s")) // warm: sequence 0
	entered, release := h.gate.armHold()
	held := make(chan error, 1)
	go func() {
		_, err := h.svc.RecordError(ctx, timeoutOn("second", execute, "s")) // sequence 1
		held <- err
	}()
	<-entered
	taken, fresh := make(directory.ChanReplier, 1), make(directory.ChanReplier, 1)
	h.sys.Root.Send(h.svc.PID(), &directory.Call{Msg: withID(timeoutOn("second", execute, "s"), id), Replier: taken})
	h.sys.Root.Send(h.svc.PID(), &directory.Call{Msg: timeoutOn("second", execute, "s"), Replier: fresh})
	probe(t, h, "second")
	release()
	if err := <-held; err != nil {
		t.Fatalf("held write: %v", err)
	}
	if r := <-taken; !errors.Is(r.Err, errs.ErrAlreadyExists) {
		t.Fatalf("record id of another plan: %v, %v; want ALREADY_EXISTS", r.Msg, r.Err)
	}
	f := <-fresh
	if f.Err != nil {
		t.Fatalf("new record behind the conflict: %v", f.Err)
	}
	if rec := f.Msg.(*planv1.RecordErrorResponse).GetRecord(); rec.GetSequence() != 2 || rec.GetRetryCount() != 3 {
		t.Fatalf("new record: sequence %d retry_count %d; want 2 3", rec.GetSequence(), rec.GetRetryCount())
	}
	// Asked again, on its own: the same answer.
	if _, err := h.svc.RecordError(ctx, withID(timeoutOn("second", execute, "s"), id)); !errors.Is(err, errs.ErrAlreadyExists) {
		t.Fatalf("again: %v; want ALREADY_EXISTS", err)
	}
	if n := len(history(t, h.svc, "second")); n != 3 {
		t.Fatalf("%d records in the second plan; want 3", n)
	}
	if recs := history(t, h.svc, "first"); len(recs) != 1 || recs[0].GetRecordId() != id {
		t.Fatalf("first plan: %v", recs)
	}
}

// When the original's write fails, the retries that waited on it fail with
// it (nothing was stored); the next retry stores the record once.
func TestRetriesOfAFailedWriteFailWithIt(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ctx := ctxT(t)
	const p = "failing"
	record(t, h.svc, timeoutOn(p, execute, "s"))
	id := ids.New()

	entered, release := h.gate.armHold()
	h.gate.failNext(errs.ResourceExhausted("injected: disk full"), nil)
	first := make(chan error, 1)
	go func() {
		_, err := h.svc.RecordError(ctx, withID(timeoutOn(p, execute, "s"), id))
		first <- err
	}()
	<-entered
	retry := make(directory.ChanReplier, 1)
	h.sys.Root.Send(h.svc.PID(), &directory.Call{Msg: withID(timeoutOn(p, execute, "s"), id), Replier: retry})
	probe(t, h, p)
	release()
	if err := <-first; !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("original: %v; want the injected RESOURCE_EXHAUSTED", err)
	}
	if r := <-retry; !errors.Is(r.Err, errs.ErrResourceExhausted) {
		t.Fatalf("retry waiting on the failed write: %v, %v; want its error", r.Msg, r.Err)
	}
	resp := recordResp(t, h.svc, withID(timeoutOn(p, execute, "s"), id))
	if resp.GetDuplicate() || resp.GetRecord().GetSequence() != 1 || resp.GetRecord().GetRetryCount() != 2 {
		t.Fatalf("retry after the failure: %v; want a new record at sequence 1, retry_count 2", resp)
	}
	wantOriginal(t, "retry after it committed", recordResp(t, h.svc, withID(timeoutOn(p, execute, "s"), id)), resp.GetRecord())
	if n := len(history(t, h.svc, p)); n != 2 {
		t.Fatalf("%d records; want 2", n)
	}
}

// A record_id that is not a canonical ULID is INVALID_ARGUMENT and stores
// nothing.
func TestRecordIDMustBeAULID(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	good := ids.New()
	for _, bad := range []string{"x", "not-a-ulid", good[:25], good + "0", "01hxm2a6k1p2e9q9d4gq7j4s7z", "8" + good[1:]} {
		if _, err := h.svc.RecordError(ctxT(t), withID(timeoutOn("p", execute, "s"), bad)); !isInvalid(err) {
			t.Errorf("record_id %q: %v; want INVALID_ARGUMENT", bad, err)
		}
	}
	if n := len(history(t, h.svc, "p")); n != 0 {
		t.Fatalf("%d records stored by invalid requests", n)
	}
	if r := record(t, h.svc, withID(timeoutOn("p", execute, "s"), good)); r.GetRecordId() != good || r.GetSequence() != 0 {
		t.Fatalf("valid record id: %v", r)
	}
}

// A retry that reaches another activation of the plan (another directory,
// as after a cluster move) is answered from the store with the original.
func TestRetryThroughAnotherActivation(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	a, b := h.svc, secondService(t, h)
	const p = "moved"
	id := ids.New()
	orig := recordResp(t, a, withID(timeoutOn(p, execute, "s"), id))
	if orig.GetDuplicate() {
		t.Fatal("the first attempt was answered as a duplicate")
	}
	wantOriginal(t, "retry through the other directory", recordResp(t, b, withID(timeoutOn(p, execute, "s"), id)), orig.GetRecord())
	if next := record(t, b, timeoutOn(p, execute, "s")); next.GetSequence() != 1 || next.GetRetryCount() != 2 {
		t.Fatalf("next record: sequence %d retry_count %d; want 1 2", next.GetSequence(), next.GetRetryCount())
	}
	// Back through the first directory, whose actor remembers the record
	// (a committed record stays the answer even for a fenced actor), then
	// after it stopped: a fresh actor answers from the store as well.
	wantOriginal(t, "retry back through the first directory", recordResp(t, a, withID(timeoutOn(p, execute, "s"), id)), orig.GetRecord())
	a.PassivateAll()
	wantOriginal(t, "retry through a fresh actor", recordResp(t, a, withID(timeoutOn(p, execute, "s"), id)), orig.GetRecord())
	if n := len(history(t, a, p)); n != 2 {
		t.Fatalf("%d records; want 2", n)
	}
}
