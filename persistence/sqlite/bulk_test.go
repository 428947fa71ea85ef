package sqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/storetest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func newMsg(content string, at *timestamppb.Timestamp) *sessionv1.Message {
	return &sessionv1.Message{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER, Content: content, CreatedAt: at}
}

func applyOK(t *testing.T, w persistence.Writer, cmds ...persistence.Command) []persistence.Result {
	t.Helper()
	res, err := w.Apply(context.Background(), cmds)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

func storedMessages(t *testing.T, s *Store, session string) []*sessionv1.Message {
	t.Helper()
	ms, err := s.Reader().ListMessages(context.Background(), session, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// A command's rows go in multi-row statements of 64, 8 and 1 rows; every
// row must land at its sequence, and the answer must be what a read returns.
func TestBulkAppendStoresEveryChunk(t *testing.T) {
	s := mustOpen(t, "memory:bulk-chunks")
	defer mustClose(t, s)
	id := storetest.CreateSession(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	at := timestamppb.Now()
	var turns []persistence.Turn
	for i := range 75 {
		turns = append(turns, persistence.Turn{Messages: []*sessionv1.Message{newMsg(fmt.Sprint("m", i), at)}})
	}
	turns = append(turns, persistence.Turn{Messages: []*sessionv1.Message{newMsg("t1", at), newMsg("t2", at), newMsg("t3", at)}})
	cmd := &persistence.AppendMessages{SessionID: id, Turns: turns, UpdatedAt: at.AsTime()}
	r := applyOK(t, w, cmd)[0]
	res := cmd.ResultOf(r)
	if r.Err != nil || res.NextSequence != 78 || len(res.Turns) != 76 {
		t.Fatalf("result: err %v, next %d, %d turns", r.Err, res.NextSequence, len(res.Turns))
	}
	var answered []*sessionv1.Message
	for _, tr := range res.Turns {
		if tr.Err != nil || tr.Duplicate {
			t.Fatalf("turn: %+v", tr)
		}
		answered = append(answered, tr.Messages...)
	}
	stored := storedMessages(t, s, id)
	if len(stored) != 78 {
		t.Fatalf("%d stored, want 78", len(stored))
	}
	for i, m := range stored {
		if m.Sequence != int64(i) || !proto.Equal(m, answered[i]) {
			t.Fatalf("row %d: stored %v, answered %v", i, m, answered[i])
		}
	}
}

// A retried turn among fresh ones makes the multi-row insert conflict; the
// batch is replayed row by row and every command still gets its own
// outcome, as without bulk inserts.
func TestBulkAppendReplaysRetriedTurns(t *testing.T) {
	s := mustOpen(t, "memory:bulk-retry")
	defer mustClose(t, s)
	a, b, c := storetest.CreateSession(t, s), storetest.CreateSession(t, s), storetest.CreateSession(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	at := timestamppb.Now()
	x := newMsg("x", at)
	fc := &persistence.AppendMessages{SessionID: a, Turns: []persistence.Turn{{Messages: []*sessionv1.Message{x}}}}
	fr := applyOK(t, w, fc)[0]
	if fr.Err != nil {
		t.Fatal(fr.Err)
	}
	first := fc.ResultOf(fr)
	retry := proto.Clone(x).(*sessionv1.Message)
	y, z := newMsg("y", at), newMsg("z", at)
	fresh := &persistence.AppendMessages{SessionID: b, Turns: []persistence.Turn{{Messages: []*sessionv1.Message{y}}}}
	retried := &persistence.AppendMessages{SessionID: a, NextSequence: 1, Turns: []persistence.Turn{
		{Messages: []*sessionv1.Message{retry}}, {Messages: []*sessionv1.Message{z}},
	}}
	res := applyOK(t, w, fresh, retried,
		// Stale: session c has no messages, so sequence 5 is not its next.
		&persistence.AppendMessages{SessionID: c, NextSequence: 5, Turns: []persistence.Turn{{Messages: []*sessionv1.Message{newMsg("late", at)}}}},
	)
	if res[0].Err != nil || fresh.ResultOf(res[0]).Turns[0].Messages[0].Sequence != 0 {
		t.Fatalf("fresh command: %+v", fresh.ResultOf(res[0]))
	}
	ra := retried.ResultOf(res[1])
	if res[1].Err != nil || !ra.Turns[0].Duplicate || !proto.Equal(ra.Turns[0].Messages[0], first.Turns[0].Messages[0]) {
		t.Fatalf("retried turn: %+v", ra)
	}
	if ra.Turns[1].Duplicate || ra.Turns[1].Messages[0].Sequence != 1 || ra.NextSequence != 2 {
		t.Fatalf("fresh turn after the retried one: %+v", ra)
	}
	if errs.CodeOf(res[2].Err) != errs.FailedPreconditionCode {
		t.Fatalf("stale command: %v, want FAILED_PRECONDITION", res[2].Err)
	}
	for session, want := range map[string][]string{a: {"x", "z"}, b: {"y"}, c: nil} {
		var got []string
		for _, m := range storedMessages(t, s, session) {
			got = append(got, m.Content)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("session %s stored %v, want %v", session, got, want)
		}
	}
}

// Without savepoints, the message rows of all the batch's appends are
// pooled into multi-row statements that cross command boundaries. A delete
// in the same batch must still remove the rows queued before it, and an
// append to a missing session, whose rows share a statement with other
// sessions' rows, must fail alone after the replay.
func TestBulkAppendPoolsRowsAcrossCommands(t *testing.T) {
	s := mustOpen(t, "memory:bulk-pool")
	defer mustClose(t, s)
	a, b, c, gone := storetest.CreateSession(t, s), storetest.CreateSession(t, s), storetest.CreateSession(t, s), ids.New()
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	at := timestamppb.Now()
	turns := func(prefix string, n int) []persistence.Turn {
		out := make([]persistence.Turn, n)
		for i := range out {
			out[i].Messages = []*sessionv1.Message{newMsg(fmt.Sprint(prefix, i), at)}
		}
		return out
	}
	// 40 + 40 rows: the first 64-row statement holds rows of a and b.
	appendB := &persistence.AppendMessages{SessionID: b, Turns: turns("b", 40), UpdatedAt: at.AsTime()}
	del := &persistence.DeleteSession{SessionID: a}
	res := applyOK(t, w,
		&persistence.AppendMessages{SessionID: a, Turns: turns("a", 40), UpdatedAt: at.AsTime()},
		appendB,
		del,
	)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("command %d: %v", i, r.Err)
		}
	}
	if next, removed := appendB.ResultOf(res[1]).NextSequence, del.ResultOf(res[2]).MessagesRemoved; next != 40 || removed != 40 {
		t.Fatalf("b next %d, a removed %d; want 40 and 40", next, removed)
	}
	if n := len(storedMessages(t, s, b)); n != 40 {
		t.Fatalf("b holds %d messages, want 40", n)
	}

	// A missing session between two live ones: its rows would sit in the
	// same statement as theirs.
	live0 := &persistence.AppendMessages{SessionID: b, NextSequence: 40, Turns: turns("b", 30), UpdatedAt: at.AsTime()}
	live2 := &persistence.AppendMessages{SessionID: c, Turns: turns("c", 30), UpdatedAt: at.AsTime()}
	res = applyOK(t, w,
		live0,
		&persistence.AppendMessages{SessionID: gone, Turns: turns("g", 30), UpdatedAt: at.AsTime()},
		live2,
	)
	if res[0].Err != nil || live0.ResultOf(res[0]).NextSequence != 70 || res[2].Err != nil || live2.ResultOf(res[2]).NextSequence != 30 {
		t.Fatalf("live sessions: %v %+v / %v %+v", res[0].Err, live0.ResultOf(res[0]), res[2].Err, live2.ResultOf(res[2]))
	}
	if errs.CodeOf(res[1].Err) != errs.NotFoundCode {
		t.Fatalf("missing session: %v, want NOT_FOUND", res[1].Err)
	}
	for session, want := range map[string]int{b: 70, c: 30, gone: 0} {
		ms := storedMessages(t, s, session)
		if len(ms) != want {
			t.Errorf("session %s holds %d messages, want %d", session, len(ms), want)
		}
		for i, m := range ms {
			if m.Sequence != int64(i) {
				t.Fatalf("session %s row %d has sequence %d", session, i, m.Sequence)
			}
		}
	}
}

// The pooled session advance carries each append's epoch and expected
// sequence; one stale epoch or moved sequence among many appends fails
// only its own command, with its own error, after the replay.
func TestBulkAppendPooledAdvanceChecksEachCommand(t *testing.T) {
	s := mustOpen(t, "memory:bulk-advance")
	defer mustClose(t, s)
	a, b, c := storetest.CreateSession(t, s), storetest.CreateSession(t, s), storetest.CreateSession(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	var epochs []int64
	for range 2 {
		res := applyOK(t, w, &persistence.Activate{Kind: persistence.OwnerSession, ID: a})[0]
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		epochs = append(epochs, res.Epoch)
	}
	at := timestamppb.Now()
	one := func() []persistence.Turn {
		return []persistence.Turn{{Messages: []*sessionv1.Message{newMsg("m", at)}}}
	}
	// Each failing command in a batch of its own with a good one: a
	// second advance of the same session would force the replay anyway.
	good := &persistence.AppendMessages{SessionID: b, Turns: one(), UpdatedAt: at.AsTime()}
	res := applyOK(t, w,
		good,
		&persistence.AppendMessages{SessionID: a, Epoch: epochs[0], Turns: one(), UpdatedAt: at.AsTime()},
	)
	if res[0].Err != nil || good.ResultOf(res[0]).NextSequence != 1 {
		t.Errorf("b: %v %+v", res[0].Err, good.ResultOf(res[0]))
	}
	if !errors.Is(res[1].Err, persistence.ErrFenced) {
		t.Errorf("a with the old epoch %d: %v, want ErrFenced", epochs[0], res[1].Err)
	}
	current := &persistence.AppendMessages{SessionID: a, Epoch: epochs[1], Turns: one(), UpdatedAt: at.AsTime()}
	res = applyOK(t, w,
		current,
		&persistence.AppendMessages{SessionID: c, NextSequence: 3, Turns: one(), UpdatedAt: at.AsTime()},
	)
	if res[0].Err != nil || current.ResultOf(res[0]).NextSequence != 1 {
		t.Errorf("a with the current epoch %d: %v %+v", epochs[1], res[0].Err, current.ResultOf(res[0]))
	}
	if errs.CodeOf(res[1].Err) != errs.FailedPreconditionCode {
		t.Errorf("c at a moved sequence: %v, want FAILED_PRECONDITION", res[1].Err)
	}
	for session, want := range map[string]int{a: 1, b: 1, c: 0} {
		if n := len(storedMessages(t, s, session)); n != want {
			t.Errorf("session %s holds %d messages, want %d", session, n, want)
		}
	}
}
