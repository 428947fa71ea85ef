package feed_test

import (
	"testing"

	"github.com/agentstate/agentstate/actors/feed"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/protobuf/proto"
)

// TestRewindDeliversThePageAgain: a tail rewound to its cursor before a
// Next returns the same events again — from the store, from the ring, and
// the final ended event — and then goes on as if they had been delivered
// once. (The gRPC feed streams drop a page they have no room to hold and
// rewind.)
func TestRewindDeliversThePageAgain(t *testing.T) {
	e := newEnv(t, feed.Config{}, true)
	id := e.create()
	e.appendN(id, 5)
	tail := e.tailSession(&feedv1.TailSessionRequest{SessionId: id})
	again := func() []*feedv1.SessionEvent {
		t.Helper()
		mark := tail.Sequence()
		first, err := tail.Next(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		tail.Rewind(mark)
		if tail.Sequence() != mark {
			t.Fatalf("cursor %d after Rewind(%d)", tail.Sequence(), mark)
		}
		second, err := tail.Next(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(first) != len(second) {
			t.Fatalf("rewound Next returned %d events, want the %d of before", len(second), len(first))
		}
		for i := range first {
			if !proto.Equal(first[i], second[i]) {
				t.Fatalf("rewound event %d is %v, want %v", i, second[i], first[i])
			}
		}
		return second
	}
	var v sessionView
	v.take(again()) // from the store
	e.appendN(id, 3)
	for len(v.seqs) < 8 {
		v.take(again()) // the store or the ring
	}
	dense(t, v.seqs, 0, 8)
	if _, err := e.node.Sessions().Close(e.ctx, &sessionv1.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	for v.ended == 0 {
		v.take(again())
	}
	if v.ended != feedv1.SessionEnded_REASON_CLOSED {
		t.Fatalf("ended %v, want closed", v.ended)
	}
	dense(t, v.seqs, 0, 8)

	changes, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer changes.Close()
	mark := changes.Position()
	first, err := changes.Next(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	changes.Rewind(mark)
	second, err := changes.Next(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) == 0 || len(first) != len(second) || !proto.Equal(first[0], second[0]) || !proto.Equal(first[len(first)-1], second[len(second)-1]) {
		t.Fatalf("the change tail's rewound page differs: %d events, then %d", len(first), len(second))
	}
}
