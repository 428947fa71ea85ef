package feed_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/feed"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/postgres"
	"github.com/agentstate/agentstate/persistence/sqlite"
)

// The first write of a cold session's owner is its activation carrying
// the write (persistence.Activate). A tail must learn of it from that
// commit alone: these tests append exactly one message after the owner
// passivated, so no later commit can wake the hub in its stead.

// stores opens each store kind a cold write is tested on.
var stores = []struct {
	name string
	open func(testing.TB) persistence.Store
}{
	{"sqlite", func(tb testing.TB) persistence.Store {
		st, err := sqlite.Open(filepath.Join(tb.TempDir(), "feed.db"))
		if err != nil {
			tb.Fatal(err)
		}
		return st
	}},
	{"postgres", func(tb testing.TB) persistence.Store {
		st, err := postgres.Open(context.Background(), freshPostgres(tb))
		if err != nil {
			tb.Fatal(err)
		}
		return st
	}},
}

// coldDelivery bounds how long a tail may take to deliver a commit it
// was woken for: the bug never delivered it.
const coldDelivery = time.Second

// passivate passivates every session actor and returns once none is
// live, so that the next request activates a fresh owner.
func (e *env) passivate() {
	e.tb.Helper()
	e.node.Sessions().PassivateAll()
	deadline := time.Now().Add(10 * time.Second)
	for e.node.Sessions().ActiveActors() > 0 {
		if time.Now().After(deadline) {
			e.tb.Fatal("session actor not passivated")
		}
		time.Sleep(time.Millisecond) // polling a condition, not ordering events
	}
}

func TestSessionTailSeesColdOwnersFirstAppend(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			e := newEnvOn(t, s.open(t), feed.Config{}, false)
			id := e.create()
			e.appendN(id, 1)
			tail := e.tailSession(&feedv1.TailSessionRequest{SessionId: id})
			var v sessionView
			readSession(t, tail, &v, 1)
			e.passivate()
			cold := e.foldedWrites(id)
			e.appendN(id, 1)
			if e.foldedWrites(id) != cold+1 {
				t.Fatal("the append after passivation did not ride in a fresh owner's activation")
			}
			ctx, cancel := context.WithTimeout(e.ctx, coldDelivery)
			defer cancel()
			for len(v.seqs) < 2 {
				evs, err := tail.Next(ctx)
				if err != nil {
					t.Fatalf("the cold owner's one append was not delivered within %v: %v", coldDelivery, err)
				}
				v.take(evs)
			}
			dense(t, v.seqs, 0, 2)
		})
	}
}

func TestChangeTailSeesColdOwnersFirstAppend(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			e := newEnvOn(t, s.open(t), feed.Config{}, true)
			id := e.create()
			e.appendN(id, 1)
			tail, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{Filter: &feedv1.ChangeFilter{SessionId: id}})
			if err != nil {
				t.Fatal(err)
			}
			defer tail.Close()
			var v changeView
			before := len(e.storedEntries(&feedv1.ChangeFilter{SessionId: id}, 0))
			readChanges(t, tail, &v, before)
			e.passivate()
			cold := e.foldedWrites(id)
			e.appendN(id, 1)
			if e.foldedWrites(id) != cold+1 {
				t.Fatal("the append after passivation did not ride in a fresh owner's activation")
			}
			ctx, cancel := context.WithTimeout(e.ctx, coldDelivery)
			defer cancel()
			for len(v.positions) < before+1 {
				evs, err := tail.Next(ctx)
				if err != nil {
					t.Fatalf("the cold owner's one append was not delivered within %v: %v", coldDelivery, err)
				}
				v.take(evs)
			}
			if got := v.entries[len(v.entries)-1].GetEventType(); got != audit.EventMessageAppended {
				t.Fatalf("last entry %s, want the append's message.appended", got)
			}
		})
	}
}
