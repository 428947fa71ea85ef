package feed_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/feed"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestSessionTailCatchesUpThenLive(t *testing.T) {
	e := newEnv(t, feed.Config{}, false)
	id := e.create()
	e.appendN(id, 5)
	tail := e.tailSession(&feedv1.TailSessionRequest{SessionId: id})
	var v sessionView
	readSession(t, tail, &v, 5)
	e.appendN(id, 7)
	readSession(t, tail, &v, 12)
	dense(t, v.seqs, 0, 12)
	stored := e.storedMessages(id)
	for i, m := range stored {
		if v.ids[i] != m.GetMessageId() {
			t.Fatalf("message %d: delivered %s, stored %s", i, v.ids[i], m.GetMessageId())
		}
	}
	if _, err := e.node.Sessions().Close(e.ctx, &sessionv1.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	readToEnd(t, tail, &v)
	if v.ended != feedv1.SessionEnded_REASON_CLOSED {
		t.Fatalf("ended %v, want CLOSED", v.ended)
	}
	dense(t, v.seqs, 0, 12)
}

func TestSessionTailResumesAndFromNow(t *testing.T) {
	e := newEnv(t, feed.Config{}, false)
	id := e.create()
	e.appendN(id, 10)
	resumed := e.tailSession(&feedv1.TailSessionRequest{SessionId: id, FromSequence: 6})
	now := e.tailSession(&feedv1.TailSessionRequest{SessionId: id, FromNow: true})
	e.appendN(id, 3)
	var rv, nv sessionView
	readSession(t, resumed, &rv, 7)
	readSession(t, now, &nv, 3)
	dense(t, rv.seqs, 6, 7)
	dense(t, nv.seqs, 10, 3)
}

func TestSessionTailRefusesBadRequests(t *testing.T) {
	e := newEnv(t, feed.Config{}, false)
	id := e.create()
	e.appendN(id, 2)
	for _, c := range []struct {
		req  *feedv1.TailSessionRequest
		code errs.Code
	}{
		{&feedv1.TailSessionRequest{SessionId: "not a ulid"}, errs.InvalidArgumentCode},
		{&feedv1.TailSessionRequest{SessionId: ids.New()}, errs.NotFoundCode},
		{&feedv1.TailSessionRequest{SessionId: id, FromSequence: -1}, errs.InvalidArgumentCode},
		{&feedv1.TailSessionRequest{SessionId: id, FromSequence: 3}, errs.InvalidArgumentCode},
	} {
		if _, err := e.hub.TailSession(e.ctx, c.req); errs.CodeOf(err) != c.code {
			t.Errorf("%v: got %v, want %v", c.req, err, c.code)
		}
	}
	if _, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{AfterPosition: 1 << 40}); errs.CodeOf(err) != errs.InvalidArgumentCode {
		t.Errorf("after_position past the head: got %v", err)
	}
	if _, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{Filter: &feedv1.ChangeFilter{EventTypes: []string{""}}}); errs.CodeOf(err) != errs.InvalidArgumentCode {
		t.Errorf("empty event type: got %v", err)
	}
}

// A session actor that is passivated (idle, or PassivateAll) is not the
// hub: its tails go on, and the next activation's appends reach them.
func TestSessionTailOutlivesPassivation(t *testing.T) {
	e := newEnv(t, feed.Config{}, false)
	id := e.create()
	tail := e.tailSession(&feedv1.TailSessionRequest{SessionId: id})
	e.appendN(id, 3)
	var v sessionView
	readSession(t, tail, &v, 3)
	e.node.Sessions().PassivateAll()
	deadline := time.Now().Add(10 * time.Second)
	for e.node.Sessions().ActiveActors() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("session actor not passivated")
		}
		time.Sleep(time.Millisecond) // polling a condition, not ordering events
	}
	e.appendN(id, 3)
	readSession(t, tail, &v, 6)
	dense(t, v.seqs, 0, 6)
}

func TestSessionTailEndsOnDelete(t *testing.T) {
	e := newEnv(t, feed.Config{}, false)
	id := e.create()
	e.appendN(id, 2)
	tail := e.tailSession(&feedv1.TailSessionRequest{SessionId: id})
	var v sessionView
	readSession(t, tail, &v, 2)
	if _, err := e.node.Sessions().Delete(e.ctx, &sessionv1.DeleteSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	readToEnd(t, tail, &v)
	if v.ended != feedv1.SessionEnded_REASON_DELETED {
		t.Fatalf("ended %v, want DELETED", v.ended)
	}
}

// A tail that does not read while far more than its ring holds commits
// falls behind the ring and is served from the store: it still gets every
// message once, in order.
func TestSlowSessionTailCatchesUpFromStore(t *testing.T) {
	e := newEnv(t, feed.Config{SessionRingBytes: 1}, false)
	id := e.create()
	tail := e.tailSession(&feedv1.TailSessionRequest{SessionId: id})
	e.appendN(id, 50)
	var v sessionView
	readSession(t, tail, &v, 50)
	e.appendN(id, 5)
	readSession(t, tail, &v, 55)
	dense(t, v.seqs, 0, 55)
}

// changeView is what a change tail delivered.
type changeView struct {
	positions []int64
	entries   []*auditv1.AuditEntry
	pruned    [][2]int64
	ended     bool
}

func (v *changeView) take(evs []*feedv1.ChangeEvent) {
	for _, ev := range evs {
		switch x := ev.Event.(type) {
		case *feedv1.ChangeEvent_Entry:
			v.positions = append(v.positions, x.Entry.GetPosition())
			v.entries = append(v.entries, x.Entry)
		case *feedv1.ChangeEvent_Pruned:
			v.pruned = append(v.pruned, [2]int64{x.Pruned.GetAfterPosition(), x.Pruned.GetToPosition()})
		case *feedv1.ChangeEvent_Ended:
			v.ended = true
		}
	}
}

func readChanges(tb testing.TB, t *feed.ChangeTail, v *changeView, want int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(v.positions) < want && !v.ended {
		evs, err := t.Next(ctx)
		if err != nil {
			tb.Fatalf("Next after %d entries: %v", len(v.positions), err)
		}
		v.take(evs)
	}
}

// storedEntries is the audit trail as the store has it, filtered.
func (e *env) storedEntries(f *feedv1.ChangeFilter, after int64) []int64 {
	e.tb.Helper()
	pf, _ := feed.FilterOf(f)
	_, head, err := e.store.Reader().AuditBounds(e.ctx)
	if err != nil {
		e.tb.Fatal(err)
	}
	var out []int64
	for {
		es, err := e.store.Reader().FeedAudit(e.ctx, pf, after, head, 1000)
		if err != nil {
			e.tb.Fatal(err)
		}
		if len(es) == 0 {
			return out
		}
		for _, x := range es {
			out = append(out, x.GetPosition())
		}
		after = es[len(es)-1].GetPosition()
	}
}

func TestChangeTailFiltersAndResumes(t *testing.T) {
	e := newEnv(t, feed.Config{}, true)
	a, b := e.create(), e.create()
	e.appendN(a, 3)
	all, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	onlyB, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{Filter: &feedv1.ChangeFilter{
		SessionId: b, EventTypes: []string{audit.EventMessageAppended, audit.EventSessionClosed}}})
	if err != nil {
		t.Fatal(err)
	}
	defer onlyB.Close()
	e.appendN(b, 4)
	e.appendN(a, 2)
	if _, err := e.node.Sessions().Close(e.ctx, &sessionv1.CloseSessionRequest{SessionId: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.node.Audit().Record(e.ctx, &auditv1.RecordRequest{EventType: audit.EventConfigChanged, Sync: true, DetailsJson: "{}"}); err != nil {
		t.Fatal(err)
	}
	wantAll := e.storedEntries(nil, 0)
	wantB := e.storedEntries(&feedv1.ChangeFilter{SessionId: b, EventTypes: []string{audit.EventMessageAppended, audit.EventSessionClosed}}, 0)
	if len(wantB) != 5 {
		t.Fatalf("store has %d entries for b, want 5", len(wantB))
	}
	var va, vb changeView
	readChanges(t, all, &va, len(wantAll))
	readChanges(t, onlyB, &vb, len(wantB))
	if !slices.Equal(va.positions, wantAll) || !slices.Equal(vb.positions, wantB) {
		t.Fatalf("all: got %v want %v; b: got %v want %v", va.positions, wantAll, vb.positions, wantB)
	}
	// Resume from the middle: exactly what follows.
	mid := wantAll[len(wantAll)/2]
	resumed, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{AfterPosition: mid})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	var vr changeView
	readChanges(t, resumed, &vr, len(wantAll)-len(wantAll)/2-1)
	if !slices.Equal(vr.positions, wantAll[len(wantAll)/2+1:]) {
		t.Fatalf("resumed: got %v want %v", vr.positions, wantAll[len(wantAll)/2+1:])
	}
}

func TestChangeTailReportsPrunedRange(t *testing.T) {
	e := newEnv(t, feed.Config{}, true)
	id := e.create()
	e.appendN(id, 4)
	if _, err := e.node.Audit().Prune(e.ctx, &auditv1.PruneRequest{OlderThan: timestamppb.New(time.Now().Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	anchor, _, err := e.store.Reader().AuditBounds(e.ctx)
	if err != nil || anchor < 5 {
		t.Fatalf("anchor %d, %v; want at least the 5 entries written", anchor, err)
	}
	tail, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	var v changeView
	for len(v.pruned) == 0 {
		evs, err := tail.Next(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		v.take(evs)
	}
	if v.pruned[0] != [2]int64{0, anchor} {
		t.Fatalf("pruned %v, want (0, %d]", v.pruned[0], anchor)
	}
}

// Stopping: the writer commits what it accepted, the hub reads it, every
// tail delivers it all and then ends; Next then returns io.EOF.
func TestCloseDeliversEverythingThenEnds(t *testing.T) {
	e := newEnv(t, feed.Config{}, true)
	id := e.create()
	st := e.tailSession(&feedv1.TailSessionRequest{SessionId: id})
	ct, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer ct.Close()
	e.appendN(id, 20)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		e.stop(time.Minute)
	}()
	var sv sessionView
	readToEnd(t, st, &sv)
	var cv changeView
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		evs, err := ct.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		cv.take(evs)
	}
	dense(t, sv.seqs, 0, 20)
	if sv.ended != feedv1.SessionEnded_REASON_NODE_STOPPING || !cv.ended {
		t.Fatalf("ended: session %v, changes %v", sv.ended, cv.ended)
	}
	if want := e.storedEntries(nil, 0); !slices.Equal(cv.positions, want) {
		t.Fatalf("changes: got %v want %v", cv.positions, want)
	}
	st.Close()
	ct.Close()
	<-stopped
	if _, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{}); errs.CodeOf(err) != errs.UnavailableCode {
		t.Fatalf("a tail after Close: %v, want UNAVAILABLE", err)
	}
}
