package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
)

// An Activate inside a batch moves its key's epoch for the commands after
// it: the set's fences follow it without a replay, an append of the new
// epoch goes in, and one of the old epoch after it is fenced, alone.
func TestAppendSetFencesFollowActivate(t *testing.T) {
	a, _ := twoNodes(t)
	ss := ownedSessions(a, 2)
	newEpoch := appendCmd(ss[0], 1, message("epoch 2"))
	newEpoch.Epoch = 2
	before := a.store.replays
	res := a.apply(appendCmd(ss[0], 0, message("epoch 1")), appendCmd(ss[1], 0, message("other")),
		&persistence.Activate{Kind: persistence.OwnerSession, ID: ss[0]}, newEpoch)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("command %d: %v", i, r.Err)
		}
	}
	if a.store.replays != before {
		t.Fatalf("%d replays of a batch whose commands all hold", a.store.replays-before)
	}

	stale := appendCmd(ss[0], 2, message("epoch 1 again"))
	good := appendCmd(ss[0], 2, message("epoch 3"))
	good.Epoch = 3
	res = a.apply(&persistence.Activate{Kind: persistence.OwnerSession, ID: ss[0]}, stale, good, appendCmd(ss[1], 1, message("x")))
	if !errors.Is(res[1].Err, persistence.ErrFenced) {
		t.Fatalf("an append of the epoch before the batch's Activate: %v, want ErrFenced", res[1].Err)
	}
	if res[0].Err != nil || res[2].Err != nil || res[3].Err != nil {
		t.Fatalf("results: %v %v %v", res[0].Err, res[2].Err, res[3].Err)
	}
	ms, err := a.store.Reader().ListMessages(context.Background(), ss[0], 0, 0)
	if err != nil || len(ms) != 3 || ms[2].Content != "epoch 3" {
		t.Fatalf("session 0 holds %v (%v)", ms, err)
	}
}

// Two appends to one session in one set must chain: the second starts
// where the first leaves the session. One that does not fails alone, and
// the rows of the set's other appends are stored with their sequences.
func TestAppendSetChainsAppendsOfOneSession(t *testing.T) {
	a, _ := twoNodes(t)
	ss := ownedSessions(a, 2)
	before := a.store.replays
	res := a.apply(appendCmd(ss[0], 0, message("a"), message("b")), appendCmd(ss[1], 0, message("c")),
		appendCmd(ss[0], 1, message("overlaps b")), appendCmd(ss[0], 2, message("d")))
	if a.store.replays != before+1 {
		t.Fatalf("%d replays, want 1", a.store.replays-before)
	}
	if errs.CodeOf(res[2].Err) != errs.FailedPreconditionCode {
		t.Fatalf("an append at a sequence the set's first append took: %v", res[2].Err)
	}
	for _, i := range []int{0, 1, 3} {
		if res[i].Err != nil {
			t.Fatalf("command %d: %v", i, res[i].Err)
		}
	}
	ms, err := a.store.Reader().ListMessages(context.Background(), ss[0], 0, 0)
	if err != nil || len(ms) != 3 || ms[2].Content != "d" || ms[2].Sequence != 2 {
		t.Fatalf("session 0 holds %v (%v)", ms, err)
	}
	if s, err := a.store.Reader().GetSession(context.Background(), ss[0]); err != nil || s.MessageCount != 3 {
		t.Fatalf("session 0: %v (%v)", s, err)
	}
	if n := len(verifyChain(t, a.store.Reader())); n != 3 {
		t.Fatalf("%d audit entries, want 3", n)
	}
}

// plainAppend is appendCmd without audit entries: its batch locks no
// chain, so BEGIN and the owner locks go with the pipeline and the fences
// are checked when their answer comes (checkFences).
func plainAppend(id string, epoch, next int64, ms ...*sessionv1.Message) *persistence.AppendMessages {
	return &persistence.AppendMessages{Epoch: epoch, SessionID: id, NextSequence: next, Turns: []persistence.Turn{{Messages: ms}}}
}

// Without an audit entry, BEGIN and the locks are sent with the first
// statements: an append of an epoch that is not the key's fails alone
// (fenced), and one of a key never activated too; the others go in
// without a replay when all hold.
func TestAppendSetDeferredFences(t *testing.T) {
	a, _ := twoNodes(t)
	ss := ownedSessions(a, 2)
	before, connects := a.store.replays, a.store.connects
	res := a.apply(plainAppend(ss[0], 1, 0, message("a")), plainAppend(ss[1], 1, 0, message("b")))
	if res[0].Err != nil || res[1].Err != nil || a.store.replays != before {
		t.Fatalf("results %v %v, %d replays", res[0].Err, res[1].Err, a.store.replays-before)
	}
	// The future epoch's append is right in all but its fence.
	res = a.apply(plainAppend(ss[0], 1, 1, message("c")), plainAppend(ss[1], 2, 1, message("future epoch")))
	if a.store.replays != before+1 {
		t.Fatalf("%d replays, want 1", a.store.replays-before)
	}
	if !errors.Is(res[1].Err, persistence.ErrFenced) || res[0].Err != nil {
		t.Fatalf("results: %v, %v; want the second fenced", res[0].Err, res[1].Err)
	}
	res = a.apply(plainAppend(ids.New(), 1, 0, message("never activated")))
	if !errors.Is(res[0].Err, persistence.ErrFenced) {
		t.Fatalf("an append to a key never activated: %v", res[0].Err)
	}
	for i, want := range []string{"a c", "b"} {
		ms, err := a.store.Reader().ListMessages(context.Background(), ss[i], 0, 0)
		var got []string
		for _, m := range ms {
			got = append(got, m.Content)
		}
		if err != nil || strings.Join(got, " ") != want {
			t.Fatalf("session %d holds %q (%v), want %q", i, got, err, want)
		}
	}
	if a.store.connects != connects {
		t.Fatalf("the writer reconnected")
	}
}
