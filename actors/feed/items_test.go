package feed_test

import (
	"testing"

	"github.com/agentstate/agentstate/actors/feed"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

// A tail delivers a keyed message's item key and kind, and a message kept
// in favour of a stored one (KEY_CONFLICT_KEEP_STORED) not at all: it was
// never stored.
func TestSessionTailDeliversItemKeys(t *testing.T) {
	e := newEnv(t, feed.Config{}, false)
	id := e.create()
	keyed := func(key string) *sessionv1.NewMessage {
		return &sessionv1.NewMessage{Role: sessionv1.Role_ROLE_TOOL, Content: key, ItemKey: key, Kind: "write",
			OnKeyConflict: sessionv1.KeyConflict_KEY_CONFLICT_KEEP_STORED}
	}
	for _, turn := range [][]*sessionv1.NewMessage{{keyed("a")}, {keyed("a"), keyed("b")}} {
		if _, err := e.node.Sessions().Append(e.ctx, &sessionv1.AppendRequest{SessionId: id, Messages: turn}); err != nil {
			t.Fatal(err)
		}
	}
	tail := e.tailSession(&feedv1.TailSessionRequest{SessionId: id})
	var got []*sessionv1.Message
	for len(got) < 2 {
		evs, err := tail.Next(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if m := ev.GetMessage(); m != nil {
				got = append(got, m)
			}
		}
	}
	if got[0].GetItemKey() != "a" || got[1].GetItemKey() != "b" || got[1].GetKind() != "write" || got[1].GetSequence() != 1 {
		t.Fatalf("delivered %v", got)
	}
}
