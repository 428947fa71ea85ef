package feed_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/feed"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

// The stress test: 16 writers append to 32 sessions while 64
// subscribers follow them — 32 session tails and 32 change tails (all
// entries, one session's entries, or two event types), every fourth slow,
// every fourth other one reconnecting from its last position every few
// events. The rings are tiny, so tails keep falling behind them and
// catching up from the store. Each subscriber's view must equal the
// store's: in order, no gap, no duplicate.
func TestStressTailsEqualTheStore(t *testing.T) {
	const (
		writers     = 16
		sessions    = 32
		turnsPer    = 40 // per writer
		reconnectAt = 7  // events between reconnections
	)
	e := newEnv(t, feed.Config{ChangeRingBytes: 8 << 10, SessionRingBytes: 2 << 10}, true)
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = e.create()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	type result struct {
		name string
		err  error
		// session tails
		id   string
		seqs []int64
		mids []string
		// change tails
		filter    *feedv1.ChangeFilter
		positions []int64
	}
	results := make([]*result, 0, 64)
	var subs sync.WaitGroup
	slow := func(i int) bool { return i%4 == 1 }
	reconnects := func(i int) bool { return i%4 == 2 }

	for i := 0; i < sessions; i++ {
		r := &result{name: fmt.Sprintf("session tail %d", i), id: ids[i]}
		results = append(results, r)
		subs.Add(1)
		go func() {
			defer subs.Done()
			var next int64
			got := 0
			for {
				tail, err := e.hub.TailSession(ctx, &feedv1.TailSessionRequest{SessionId: r.id, FromSequence: next})
				if err != nil {
					r.err = err
					return
				}
				for since := 0; !reconnects(i) || since < reconnectAt; {
					evs, err := tail.Next(ctx)
					if err != nil {
						tail.Close()
						r.err = err
						return
					}
					for _, ev := range evs {
						switch x := ev.Event.(type) {
						case *feedv1.SessionEvent_Message:
							r.seqs = append(r.seqs, x.Message.GetSequence())
							r.mids = append(r.mids, x.Message.GetMessageId())
							next = x.Message.GetSequence() + 1
							got++
							since++
						case *feedv1.SessionEvent_Ended:
							tail.Close()
							if x.Ended.GetReason() != feedv1.SessionEnded_REASON_CLOSED {
								r.err = fmt.Errorf("ended %v", x.Ended.GetReason())
							}
							return
						default:
							r.err = fmt.Errorf("unexpected event %v", ev)
						}
					}
					if slow(i) {
						time.Sleep(time.Millisecond) // a slow consumer, not synchronization
					}
				}
				tail.Close()
			}
		}()
	}
	for i := 0; i < 32; i++ {
		var f *feedv1.ChangeFilter
		closes := sessions // session_closed entries this tail will see
		switch i % 3 {
		case 1:
			f = &feedv1.ChangeFilter{SessionId: ids[i]}
			closes = 1
		case 2:
			f = &feedv1.ChangeFilter{EventTypes: []string{audit.EventMessageAppended, audit.EventSessionClosed}}
		}
		r := &result{name: fmt.Sprintf("change tail %d", i), filter: f}
		results = append(results, r)
		subs.Add(1)
		go func() {
			defer subs.Done()
			var after int64
			for {
				tail, err := e.hub.TailChanges(ctx, &feedv1.TailChangesRequest{Filter: f, AfterPosition: after})
				if err != nil {
					r.err = err
					return
				}
				for since := 0; !reconnects(i) || since < reconnectAt; {
					evs, err := tail.Next(ctx)
					if err != nil {
						tail.Close()
						r.err = err
						return
					}
					for _, ev := range evs {
						x := ev.GetEntry()
						if x == nil {
							r.err = fmt.Errorf("unexpected event %v", ev)
							continue
						}
						r.positions = append(r.positions, x.GetPosition())
						after = x.GetPosition()
						since++
						if x.GetEventType() == audit.EventSessionClosed {
							if closes--; closes == 0 {
								tail.Close()
								return
							}
						}
					}
					if slow(i) {
						time.Sleep(time.Millisecond) // a slow consumer, not synchronization
					}
				}
				tail.Close()
			}
		}()
	}

	var ws sync.WaitGroup
	for w := 0; w < writers; w++ {
		ws.Add(1)
		go func() {
			defer ws.Done()
			for n := 0; n < turnsPer; n++ {
				id := ids[(w*7+n)%sessions]
				msgs := []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: fmt.Sprintf("w%d n%d", w, n)}}
				if n%3 == 0 {
					msgs = append(msgs, &sessionv1.NewMessage{Role: sessionv1.Role_ROLE_ASSISTANT, Content: "reply"})
				}
				if _, err := e.node.Sessions().Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: msgs}); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	ws.Wait()
	for _, id := range ids {
		if _, err := e.node.Sessions().Close(ctx, &sessionv1.CloseSessionRequest{SessionId: id}); err != nil {
			t.Fatal(err)
		}
	}
	subs.Wait()

	total := 0
	for _, r := range results {
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
			continue
		}
		if r.id != "" {
			stored := e.storedMessages(r.id)
			total += len(stored)
			want := make([]string, len(stored))
			for i, m := range stored {
				want[i] = m.GetMessageId()
			}
			dense(t, r.seqs, 0, len(stored))
			if !slices.Equal(r.mids, want) {
				t.Errorf("%s: message ids differ from the store's", r.name)
			}
			continue
		}
		if want := e.storedEntries(r.filter, 0); !slices.Equal(r.positions, want) {
			t.Errorf("%s (%v): %d positions delivered, store has %d; first difference at %d", r.name, r.filter,
				len(r.positions), len(want), firstDiff(r.positions, want))
		}
	}
	if total < writers*turnsPer {
		t.Fatalf("%d messages stored, want at least %d", total, writers*turnsPer)
	}
}

func firstDiff(a, b []int64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
