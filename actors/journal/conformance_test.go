package journal_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/agentstate/agentstate/actors/journal"
	"github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The persistence contract of a Proto.Actor ProviderState, case by case.
//
// These cases restate, in our own words, the conformance cases of
// persistence/conformance_test.go in upstream protoactor-go
// (github.com/asynkron/protoactor-go): persist and read an event; persist
// and read a snapshot; read ranges of events; delete events; delete
// snapshots; several actors kept apart; the snapshot interval as
// configured; data surviving Restart. Upstream's fake messages cannot be
// serialized, so events here are google.protobuf.StringValue and snapshots
// google.protobuf.Value (a different type, so the stored type name
// matters). Deletion is real: upstream lets a provider skip it, agentstate
// must not (DeleteEvents removes the events up to the index, later ones
// stay readable at theirs).

// conformance runs every case against a fresh journal each: a namespace of
// its own on the node, so no case sees another's actors.
func conformance(t *testing.T, svc journal.Sessions) {
	fresh := func(t *testing.T, interval int) persistence.ProviderState {
		return journal.New(svc, journal.Config{Namespace: "conformance-" + t.Name(), SnapshotInterval: interval})
	}
	t.Run("PersistAndGetEvent", func(t *testing.T) { persistAndGetEvent(t, fresh(t, 10)) })
	t.Run("PersistAndGetSnapshot", func(t *testing.T) { persistAndGetSnapshot(t, fresh(t, 10)) })
	t.Run("GetEventsRange", func(t *testing.T) { getEventsRange(t, fresh(t, 10)) })
	t.Run("DeleteEvents", func(t *testing.T) { deleteEvents(t, fresh(t, 10)) })
	t.Run("DeleteSnapshots", func(t *testing.T) { deleteSnapshots(t, fresh(t, 10)) })
	t.Run("MultipleActors", func(t *testing.T) { multipleActors(t, fresh(t, 10)) })
	t.Run("SnapshotInterval", func(t *testing.T) {
		for _, interval := range []int{0, 1, 5, 100} {
			if got := fresh(t, interval).GetSnapshotInterval(); got != interval {
				t.Errorf("GetSnapshotInterval = %d, configured %d", got, interval)
			}
		}
	})
	t.Run("Restart", func(t *testing.T) { restart(t, fresh(t, 10)) })
}

func TestConformanceSQLite(t *testing.T)   { conformance(t, startSQLite(t).node.Sessions()) }
func TestConformancePostgres(t *testing.T) { conformance(t, startPostgres(t).node.Sessions()) }

// Over gRPC the same cases hold: errors keep their codes across the wire
// (NOT_FOUND of a lookup, FAILED_PRECONDITION of a wrong index).
func TestConformanceOverGRPC(t *testing.T) { conformance(t, overGRPC(t, startSQLite(t))) }

func event(s string) *wrapperspb.StringValue { return wrapperspb.String(s) }
func snap(s string) *structpb.Value          { return structpb.NewStringValue(s) }

// events reads the actor's events from start to end and returns their
// strings; it fails the test on an event of another type.
func events(t *testing.T, p persistence.ProviderState, actorName string, start, end int) []string {
	t.Helper()
	var out []string
	p.GetEvents(actorName, start, end, func(e interface{}) {
		sv, ok := e.(*wrapperspb.StringValue)
		if !ok {
			t.Fatalf("event is %T, want *wrapperspb.StringValue", e)
		}
		out = append(out, sv.GetValue())
	})
	return out
}

// snapshotOf reads the actor's snapshot: its string, its index, and
// whether there is one.
func snapshotOf(t *testing.T, p persistence.ProviderState, actorName string) (string, int, bool) {
	t.Helper()
	s, idx, ok := p.GetSnapshot(actorName)
	if !ok {
		return "", 0, false
	}
	v, isValue := s.(*structpb.Value)
	if !isValue {
		t.Fatalf("snapshot is %T, want *structpb.Value", s)
	}
	return v.GetStringValue(), idx, true
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

// One event persisted is one event read back, of its own type.
func persistAndGetEvent(t *testing.T, p persistence.ProviderState) {
	p.PersistEvent("actor-1", 0, event("hello"))
	wantStrings(t, "events", events(t, p, "actor-1", 0, 0), []string{"hello"})
}

// No snapshot before one is persisted; then it comes back with its index.
// (Unlike upstream's in-memory provider, a snapshot must cover events
// that exist: see snapshotPastTheEnd.)
func persistAndGetSnapshot(t *testing.T, p persistence.ProviderState) {
	if _, _, ok := snapshotOf(t, p, "actor-1"); ok {
		t.Fatal("a snapshot before any was persisted")
	}
	for i := range 5 {
		p.PersistEvent("actor-1", i, event(fmt.Sprintf("e%d", i)))
	}
	p.PersistSnapshot("actor-1", 5, snap("state-at-5"))
	s, idx, ok := snapshotOf(t, p, "actor-1")
	if !ok || idx != 5 || s != "state-at-5" {
		t.Fatalf("snapshot = %q at %d (found %v), want \"state-at-5\" at 5", s, idx, ok)
	}
}

// Ranges: end 0 reads to the last event, a non-zero end is exclusive, and
// start == end reads nothing.
func getEventsRange(t *testing.T, p persistence.ProviderState) {
	for i := range 5 {
		p.PersistEvent("actor-1", i, event(fmt.Sprintf("e%d", i)))
	}
	wantStrings(t, "all events", events(t, p, "actor-1", 0, 0), []string{"e0", "e1", "e2", "e3", "e4"})
	wantStrings(t, "events [1,3)", events(t, p, "actor-1", 1, 3), []string{"e1", "e2"})
	wantStrings(t, "events from 3", events(t, p, "actor-1", 3, 0), []string{"e3", "e4"})
	wantStrings(t, "events [2,2)", events(t, p, "actor-1", 2, 2), nil)
}

// Deleting through index 2 removes e0..e2 for good; e3 and e4 stay, at
// their indexes, and the next index stays 5.
func deleteEvents(t *testing.T, p persistence.ProviderState) {
	for i := range 5 {
		p.PersistEvent("actor-1", i, event(fmt.Sprintf("e%d", i)))
	}
	p.DeleteEvents("actor-1", 2)
	wantStrings(t, "events after deleting through 2", events(t, p, "actor-1", 0, 0), []string{"e3", "e4"})
	wantStrings(t, "events [3,4) after the deletion", events(t, p, "actor-1", 3, 4), []string{"e3"})
	// The index never goes back: 0 is taken for good, 5 is next.
	mustPanic(t, func() { p.PersistEvent("actor-1", 0, event("again")) })
	p.PersistEvent("actor-1", 5, event("e5"))
	wantStrings(t, "events after appending e5", events(t, p, "actor-1", 0, 0), []string{"e3", "e4", "e5"})
	// Deleting past the last event removes what there is and moves nothing.
	p.DeleteEvents("actor-1", 100)
	wantStrings(t, "events after deleting through 100", events(t, p, "actor-1", 0, 0), nil)
	p.PersistEvent("actor-1", 6, event("e6"))
	wantStrings(t, "events after appending e6", events(t, p, "actor-1", 0, 0), []string{"e6"})
}

// DeleteSnapshots(n) removes a snapshot at index n (and keeps one past n).
func deleteSnapshots(t *testing.T, p persistence.ProviderState) {
	for i := range 3 {
		p.PersistEvent("actor-1", i, event(fmt.Sprintf("e%d", i)))
	}
	p.PersistSnapshot("actor-1", 3, snap("snap-3"))
	p.DeleteSnapshots("actor-1", 2)
	if s, idx, ok := snapshotOf(t, p, "actor-1"); !ok || idx != 3 || s != "snap-3" {
		t.Fatalf("after DeleteSnapshots(2): snapshot %q at %d (found %v), want snap-3 at 3", s, idx, ok)
	}
	p.DeleteSnapshots("actor-1", 3)
	if _, _, ok := snapshotOf(t, p, "actor-1"); ok {
		t.Fatal("the snapshot at 3 survived DeleteSnapshots(3)")
	}
}

// Actors' events and snapshots are kept apart; an actor that never wrote
// has neither.
func multipleActors(t *testing.T, p persistence.ProviderState) {
	p.PersistEvent("alice", 0, event("alice-e0"))
	p.PersistEvent("alice", 1, event("alice-e1"))
	p.PersistEvent("bob", 0, event("bob-e0"))
	p.PersistSnapshot("alice", 1, snap("alice-snap"))
	p.PersistSnapshot("bob", 0, snap("bob-snap"))

	wantStrings(t, "alice's events", events(t, p, "alice", 0, 0), []string{"alice-e0", "alice-e1"})
	wantStrings(t, "bob's events", events(t, p, "bob", 0, 0), []string{"bob-e0"})
	if s, idx, ok := snapshotOf(t, p, "alice"); !ok || idx != 1 || s != "alice-snap" {
		t.Errorf("alice's snapshot = %q at %d (found %v)", s, idx, ok)
	}
	if s, idx, ok := snapshotOf(t, p, "bob"); !ok || idx != 0 || s != "bob-snap" {
		t.Errorf("bob's snapshot = %q at %d (found %v)", s, idx, ok)
	}
	wantStrings(t, "charlie's events", events(t, p, "charlie", 0, 0), nil)
	if _, _, ok := snapshotOf(t, p, "charlie"); ok {
		t.Error("charlie has a snapshot")
	}
}

// Restart loses nothing.
func restart(t *testing.T, p persistence.ProviderState) {
	p.PersistEvent("actor-1", 0, event("e0"))
	p.PersistEvent("actor-1", 1, event("e1"))
	p.PersistSnapshot("actor-1", 1, snap("snap-1"))
	p.Restart()
	wantStrings(t, "events after Restart", events(t, p, "actor-1", 0, 0), []string{"e0", "e1"})
	if s, idx, ok := snapshotOf(t, p, "actor-1"); !ok || idx != 1 || s != "snap-1" {
		t.Errorf("snapshot after Restart = %q at %d (found %v), want snap-1 at 1", s, idx, ok)
	}
}
