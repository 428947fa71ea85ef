package feed_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/feed"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
)

// currentView is what a subscriber holds as current: a message per
// sequence, the ones from a Rewound's cut on dropped.
type currentView struct {
	ids     map[int64]string
	rewound []*feedv1.Rewound
}

// readWhile takes the tail's events while waiting says more are due.
func (v *currentView) readWhile(e *env, tail *feed.SessionTail, waiting func() bool) {
	e.tb.Helper()
	for waiting() {
		evs, err := tail.Next(e.ctx)
		if err != nil {
			e.tb.Fatal(err)
		}
		v.take(e.tb, evs)
	}
}

func (v *currentView) take(tb testing.TB, evs []*feedv1.SessionEvent) {
	tb.Helper()
	for _, ev := range evs {
		switch x := ev.Event.(type) {
		case *feedv1.SessionEvent_Message:
			if _, dup := v.ids[x.Message.GetSequence()]; dup {
				tb.Fatalf("sequence %d delivered twice without a rewind", x.Message.GetSequence())
			}
			v.ids[x.Message.GetSequence()] = x.Message.GetMessageId()
		case *feedv1.SessionEvent_Rewound:
			if len(evs) != 1 {
				tb.Fatalf("a Rewound event shares its page: %v", evs)
			}
			v.rewound = append(v.rewound, x.Rewound)
			for s := range v.ids {
				if s >= x.Rewound.GetFromSequence() {
					delete(v.ids, s)
				}
			}
		}
	}
}

// matches fails unless the view is exactly the stored history.
func (v *currentView) matches(tb testing.TB, stored []*sessionv1.Message) {
	tb.Helper()
	if len(v.ids) != len(stored) {
		tb.Fatalf("the tail holds %d messages as current, the store %d", len(v.ids), len(stored))
	}
	for _, m := range stored {
		if v.ids[m.GetSequence()] != m.GetMessageId() {
			tb.Fatalf("sequence %d: the tail holds %q, the store %q", m.GetSequence(), v.ids[m.GetSequence()], m.GetMessageId())
		}
	}
}

func (e *env) replace(id string, removeLast int64, contents ...string) *sessionv1.ReplaceSuffixResponse {
	e.tb.Helper()
	s, err := e.node.Sessions().Get(e.ctx, &sessionv1.GetSessionRequest{SessionId: id})
	if err != nil {
		e.tb.Fatal(err)
	}
	next := s.GetSession().GetMessageCount()
	req := &sessionv1.ReplaceSuffixRequest{SessionId: id, ExpectedNextSequence: &next,
		From: &sessionv1.ReplaceSuffixRequest_RemoveLast{RemoveLast: min(removeLast, next)}}
	for _, c := range contents {
		req.Messages = append(req.Messages, &sessionv1.NewMessage{Role: sessionv1.Role_ROLE_USER, Content: c})
	}
	r, err := e.node.Sessions().ReplaceSuffix(e.ctx, req)
	if err != nil {
		e.tb.Fatal(err)
	}
	return r
}

// A tail that delivered messages a replacement removed gets one Rewound
// event at the cut, then the new messages once, from the ring and from
// the store (a ring too small to hold the history).
func TestSessionTailRewoundAtTheCut(t *testing.T) {
	for _, ring := range []int{0, 64} {
		t.Run(fmt.Sprintf("ring %d bytes", ring), func(t *testing.T) {
			e := newEnv(t, feed.Config{SessionRingBytes: ring}, false)
			id := e.create()
			e.appendN(id, 5)
			tail := e.tailSession(&feedv1.TailSessionRequest{SessionId: id})
			v := &currentView{ids: map[int64]string{}}
			v.readWhile(e, tail, func() bool { return len(v.ids) < 5 })
			e.replace(id, 2, "x", "y", "z")
			v.readWhile(e, tail, func() bool { return len(v.rewound) == 0 || len(v.ids) < 6 })
			if r := v.rewound[0]; len(v.rewound) != 1 || r.GetFromSequence() != 3 || r.GetPreviousNextSequence() != 5 {
				t.Fatalf("rewound %v", v.rewound)
			}
			v.matches(t, e.storedMessages(id))
			// A pop below the tail's cursor, then an append.
			e.replace(id, 4)
			e.appendN(id, 1)
			v.readWhile(e, tail, func() bool { return len(v.rewound) < 2 || len(v.ids) < 3 })
			v.matches(t, e.storedMessages(id))
		})
	}
}

// A sender that drops the page holding a Rewound (Rewind to its mark)
// gets the event again.
func TestSessionTailRewindRepeatsRewound(t *testing.T) {
	e := newEnv(t, feed.Config{}, false)
	id := e.create()
	e.appendN(id, 3)
	tail := e.tailSession(&feedv1.TailSessionRequest{SessionId: id})
	v := &currentView{ids: map[int64]string{}}
	v.readWhile(e, tail, func() bool { return len(v.ids) < 3 })
	e.replace(id, 1, "new")
	mark := tail.Sequence()
	evs, err := tail.Next(e.ctx)
	if err != nil || len(evs) != 1 || evs[0].GetRewound() == nil {
		t.Fatalf("want a Rewound: %v %v", evs, err)
	}
	tail.Rewind(mark)
	if tail.Sequence() != mark {
		t.Fatalf("cursor %d after Rewind(%d)", tail.Sequence(), mark)
	}
	v.readWhile(e, tail, func() bool { return len(v.rewound) == 0 || len(v.ids) < 3 })
	v.matches(t, e.storedMessages(id))
}

// Appends and replacements race a tail: whatever it read when, what it
// holds as current once it caught up is the stored history.
func TestSessionTailFollowsRacingReplacements(t *testing.T) {
	for _, ring := range []int{0, 512} {
		t.Run(fmt.Sprintf("ring %d bytes", ring), func(t *testing.T) {
			e := newEnv(t, feed.Config{SessionRingBytes: ring}, false)
			id := e.create()
			tail := e.tailSession(&feedv1.TailSessionRequest{SessionId: id})
			final := ids.New()
			go func() {
				for i := range 60 {
					if i%3 == 2 {
						e.replace(id, int64(i%4), fmt.Sprint("r", i))
					} else {
						e.appendN(id, 2)
					}
				}
				if _, err := e.node.Sessions().Append(e.ctx, &sessionv1.AppendRequest{SessionId: id,
					Messages: []*sessionv1.NewMessage{{MessageId: final, Role: sessionv1.Role_ROLE_USER, Content: "last"}}}); err != nil {
					t.Error(err)
				}
			}()
			v := &currentView{ids: map[int64]string{}}
			ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
			defer cancel()
			for !slices.Contains(slices.Collect(maps.Values(v.ids)), final) {
				evs, err := tail.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				v.take(t, evs)
			}
			stored := e.storedMessages(id)
			v.matches(t, stored)
			if !slices.ContainsFunc(v.rewound, func(r *feedv1.Rewound) bool { return r != nil }) {
				t.Fatalf("no rewind was delivered")
			}
		})
	}
}

// A group's delete ends the tails of its sessions with REASON_DELETED.
func TestSessionTailEndsOnGroupDelete(t *testing.T) {
	e := newEnv(t, feed.Config{}, false)
	r, err := e.node.Sessions().Create(e.ctx, &sessionv1.CreateSessionRequest{ActorName: "g", ClientKey: "grp/1"})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetSession().GetSessionId()
	e.appendN(id, 2)
	tail := e.tailSession(&feedv1.TailSessionRequest{SessionId: id})
	var v sessionView
	readSession(t, tail, &v, 2)
	if _, err := e.node.Sessions().DeleteSessions(e.ctx, &sessionv1.DeleteSessionsRequest{ClientKeyPrefix: "grp/"}); err != nil {
		t.Fatal(err)
	}
	readToEnd(t, tail, &v)
	if v.ended != feedv1.SessionEnded_REASON_DELETED {
		t.Fatalf("ended %v, want deleted", v.ended)
	}
}
