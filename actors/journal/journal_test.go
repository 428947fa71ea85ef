package journal_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/journal"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// sessionOf reads the session holding an actor's journal by its client key.
func sessionOf(t *testing.T, n *testNode, namespace, key string) *sessionv1.Session {
	t.Helper()
	resp, err := n.node.Sessions().Get(context.Background(), &sessionv1.GetSessionRequest{Namespace: namespace, ClientKey: key})
	if err != nil {
		t.Fatalf("Get session of %q: %v", key, err)
	}
	return resp.GetSession()
}

// A write at the wrong index is refused before anything is stored, and
// the panic says where the session stands.
func TestPersistEventAtWrongIndexStoresNothing(t *testing.T) {
	t.Run("Embedded", func(t *testing.T) {
		n := startSQLite(t)
		wrongIndex(t, n, n.node.Sessions())
	})
	t.Run("OverGRPC", func(t *testing.T) {
		n := startSQLite(t)
		wrongIndex(t, n, overGRPC(t, n))
	})
}

func wrongIndex(t *testing.T, n *testNode, svc journal.Sessions) {
	j := journal.New(svc, journal.Config{})
	j.PersistEvent("a", 0, event("e0"))
	j.PersistEvent("a", 1, event("e1"))

	for _, idx := range []int{1, 0, 3} {
		err := mustPanic(t, func() { j.PersistEvent("a", idx, event(fmt.Sprintf("stale-%d", idx))) })
		var je *journal.Error
		if !errors.As(err, &je) || je.Op != "persist event" || je.Actor != "a" || je.Index != idx {
			t.Fatalf("PersistEvent at %d panicked with %v, want a *journal.Error for it", idx, err)
		}
		if errs.CodeOf(err) != errs.FailedPreconditionCode {
			t.Errorf("PersistEvent at %d: code %v, want FAILED_PRECONDITION", idx, errs.CodeOf(err))
		}
		if next, ok := persistence.NextSequenceOf(err); !ok || next != 2 {
			t.Errorf("PersistEvent at %d: next sequence %d (%v), want 2", idx, next, ok)
		}
	}
	wantStrings(t, "events", events(t, j, "a", 0, 0), []string{"e0", "e1"})
	if got := sessionOf(t, n, "protoactor", "a").GetMessageCount(); got != 2 {
		t.Errorf("next sequence = %d, want 2", got)
	}
	// An actor that never wrote cannot start past index 0 either.
	mustPanic(t, func() { j.PersistEvent("b", 4, event("b4")) })
	wantStrings(t, "b's events", events(t, j, "b", 0, 0), nil)
}

// Two journals (two processes) on one actor: the second to write at an
// index loses, whatever it cached.
func TestTwoWritersOneIndex(t *testing.T) {
	n := startSQLite(t)
	j1 := journal.New(n.node.Sessions(), journal.Config{})
	j2 := journal.New(n.node.Sessions(), journal.Config{})
	j1.PersistEvent("shared", 0, event("from-1"))
	mustPanic(t, func() { j2.PersistEvent("shared", 0, event("from-2")) })
	j2.PersistEvent("shared", 1, event("from-2"))
	wantStrings(t, "events", events(t, j1, "shared", 0, 0), []string{"from-1", "from-2"})
}

// Events of different types in one journal come back as their own types,
// equal to what was persisted; a snapshot keeps its type too.
func TestTypesSurviveTheStore(t *testing.T) {
	n := startSQLite(t)
	j := journal.New(n.node.Sessions(), journal.Config{})
	st, err := structpb.NewStruct(map[string]any{"k": "v", "n": 2.5, "list": []any{true, "x"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []proto.Message{wrapperspb.String("s"), wrapperspb.Int64(-7), st, wrapperspb.Bytes([]byte{0, 0xff, 1}), &wrapperspb.StringValue{}}
	for i, ev := range want {
		j.PersistEvent("mixed", i, ev)
	}
	var got []proto.Message
	j.GetEvents("mixed", 0, 0, func(e interface{}) { got = append(got, e.(proto.Message)) })
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("event %d = %T %v, want %T %v", i, got[i], got[i], want[i], want[i])
		}
	}
	j.PersistSnapshot("mixed", 5, st)
	s, idx, ok := j.GetSnapshot("mixed")
	if !ok || idx != 5 || !proto.Equal(s.(proto.Message), st) {
		t.Errorf("snapshot = %v at %d (%v), want %v at 5", s, idx, ok, st)
	}
}

// What a session holding a journal looks like to anyone reading it: one
// system message per event (base64 of the binary encoding, the type name
// in metadata), the snapshot slot covering the events before its index.
func TestStoredRepresentation(t *testing.T) {
	n := startSQLite(t)
	j := journal.New(n.node.Sessions(), journal.Config{Namespace: "actors"})
	j.PersistEvent("worker/1", 0, event("e0"))
	j.PersistSnapshot("worker/1", 1, snap("after-e0"))

	sess := sessionOf(t, n, "actors", "worker/1")
	if sess.GetActorName() != "worker/1" || sess.GetMessageCount() != 1 {
		t.Errorf("session: actor %q, next sequence %d; want worker/1, 1", sess.GetActorName(), sess.GetMessageCount())
	}
	ctx := context.Background()
	msgs, err := n.node.Sessions().ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sess.GetSessionId()})
	if err != nil || len(msgs.GetMessages()) != 1 {
		t.Fatalf("ListMessages: %v, %d messages", err, len(msgs.GetMessages()))
	}
	m := msgs.GetMessages()[0]
	var meta map[string]string
	if err := json.Unmarshal([]byte(m.GetMetadataJson()), &meta); err != nil || meta["proto_type"] != "google.protobuf.StringValue" {
		t.Errorf("metadata %s (%v), want proto_type google.protobuf.StringValue", m.GetMetadataJson(), err)
	}
	raw, err := base64.StdEncoding.DecodeString(m.GetContent())
	var sv wrapperspb.StringValue
	if err != nil || proto.Unmarshal(raw, &sv) != nil || sv.GetValue() != "e0" || m.GetRole() != sessionv1.Role_ROLE_SYSTEM {
		t.Errorf("message: role %v, content %q does not decode to e0", m.GetRole(), m.GetContent())
	}
	sn, err := n.node.Sessions().GetSnapshot(ctx, &sessionv1.GetSnapshotRequest{SessionId: sess.GetSessionId()})
	if err != nil || sn.GetSnapshot().GetSequence() != 0 {
		t.Errorf("snapshot slot covers sequence %d (%v), want 0 (index 1 = the first event not covered)", sn.GetSnapshot().GetSequence(), err)
	}
}

// An actor name that cannot be a client key (too long, not UTF-8) is
// hashed; two such names stay apart, and a name that can be one is used
// as is.
func TestActorNamesAsKeys(t *testing.T) {
	n := startSQLite(t)
	j := journal.New(n.node.Sessions(), journal.Config{})
	long1, long2 := strings.Repeat("x", 300), strings.Repeat("x", 299)+"y"
	bad := "bad\xff"
	for i, name := range []string{long1, long2, bad} {
		j.PersistEvent(name, 0, event(fmt.Sprintf("name-%d", i)))
	}
	for i, name := range []string{long1, long2, bad} {
		wantStrings(t, "events of a hashed name", events(t, j, name, 0, 0), []string{fmt.Sprintf("name-%d", i)})
	}
	sessionOf(t, n, "protoactor", "sha256:"+sha256Hex(bad))
}

// A replay longer than a page reads every page, in order, and honours end
// across pages.
func TestReplayAcrossPages(t *testing.T) {
	defer journal.SetReplayPage(3)()
	n := startSQLite(t)
	j := journal.New(n.node.Sessions(), journal.Config{})
	var want []string
	for i := range 11 {
		want = append(want, fmt.Sprintf("e%d", i))
		j.PersistEvent("long", i, event(want[i]))
	}
	wantStrings(t, "all events", events(t, j, "long", 0, 0), want)
	wantStrings(t, "events [2,8)", events(t, j, "long", 2, 8), want[2:8])
	j.DeleteEvents("long", 4)
	wantStrings(t, "events after deleting through 4", events(t, j, "long", 0, 0), want[5:])
}

// An event whose type the journal cannot resolve is not skipped: the
// replay panics, so the actor never recovers a partial history.
func TestUnknownTypeFailsTheReplay(t *testing.T) {
	n := startSQLite(t)
	journal.New(n.node.Sessions(), journal.Config{}).PersistEvent("a", 0, event("e0"))
	blind := journal.New(n.node.Sessions(), journal.Config{Types: new(protoregistry.Types)})
	err := mustPanic(t, func() { blind.GetEvents("a", 0, 0, func(interface{}) { t.Error("an event was delivered") }) })
	var je *journal.Error
	if !errors.As(err, &je) || je.Op != "get events" || !strings.Contains(err.Error(), "google.protobuf.StringValue") {
		t.Errorf("panic = %v, want a get-events *journal.Error naming the type", err)
	}
}

// A nil event is refused before anything is stored.
func TestNilEventRefused(t *testing.T) {
	n := startSQLite(t)
	j := journal.New(n.node.Sessions(), journal.Config{})
	err := mustPanic(t, func() { j.PersistEvent("a", 0, nil) })
	if errs.CodeOf(err) != errs.InvalidArgumentCode {
		t.Errorf("code %v, want INVALID_ARGUMENT", errs.CodeOf(err))
	}
	if _, err := n.node.Sessions().Get(context.Background(), &sessionv1.GetSessionRequest{Namespace: "protoactor", ClientKey: "a"}); errs.CodeOf(err) != errs.NotFoundCode {
		t.Errorf("session after a refused event: %v, want NOT_FOUND", err)
	}
}

// Actor names map to distinct journals, whatever they are: an actor named
// exactly like another's hashed key ("sha256:<hex>") is hashed itself and
// does not share that journal; a name holding a NUL persists and recovers;
// a name that could always be a key keeps it (journals stored before the
// rule are found).
func TestActorNamesMapInjectively(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) { namesInjective(t, startSQLite(t)) })
	t.Run("Postgres", func(t *testing.T) { namesInjective(t, startPostgres(t)) })
}

func namesInjective(t *testing.T, n *testNode) {
	j := journal.New(n.node.Sessions(), journal.Config{})
	for _, victim := range []string{"", strings.Repeat("v", 300), "bad\xff"} {
		forger := "sha256:" + sha256Hex(victim)
		j.PersistEvent(victim, 0, event("victim-event"))
		j.PersistEvent(forger, 0, event("forger-event"))
		wantStrings(t, "the victim's replay", events(t, j, victim, 0, 0), []string{"victim-event"})
		wantStrings(t, "the forger's replay", events(t, j, forger, 0, 0), []string{"forger-event"})
		if got := sessionOf(t, n, "protoactor", "sha256:"+sha256Hex(forger)).GetMessageCount(); got != 1 {
			t.Errorf("the forger's hashed journal holds %d events, want 1", got)
		}
	}

	nul := "worker\x00one"
	j.PersistEvent(nul, 0, event("nul-0"))
	j.PersistEvent(nul, 1, event("nul-1"))
	j.PersistSnapshot(nul, 1, snap("nul-snap"))
	fresh := journal.New(n.node.Sessions(), journal.Config{}) // nothing cached
	wantStrings(t, "a NUL name's replay", events(t, fresh, nul, 0, 0), []string{"nul-0", "nul-1"})
	if s, idx, ok := snapshotOf(t, fresh, nul); !ok || idx != 1 || s != "nul-snap" {
		t.Errorf("a NUL name's snapshot = %q at %d (%v), want nul-snap at 1", s, idx, ok)
	}
	sessionOf(t, n, "protoactor", "sha256:"+sha256Hex(nul))
	wantStrings(t, "worker's events", events(t, fresh, "worker", 0, 0), nil)

	// Literal keys: names that never had the hashed form.
	for _, name := range []string{"worker/1", "sha256:not-hex", "sha256:" + strings.Repeat("a", 63), "SHA256:" + sha256Hex("x")} {
		j.PersistEvent(name, 0, event(name))
		if got := sessionOf(t, n, "protoactor", name).GetMessageCount(); got != 1 {
			t.Errorf("%q: its literal key holds %d events, want 1", name, got)
		}
	}
}

// A snapshot index past the actor's next event index, or before the events
// it deleted, is refused (FAILED_PRECONDITION) and stores nothing: a
// recovery from it would resume the actor past its last event, or skip
// events. The recovery then still finds the snapshot it had.
func TestSnapshotOutsideTheJournalIsRefused(t *testing.T) {
	for name, svc := range map[string]func(*testNode) journal.Sessions{
		"Embedded": func(n *testNode) journal.Sessions { return n.node.Sessions() },
		"OverGRPC": func(n *testNode) journal.Sessions { return overGRPC(t, n) },
	} {
		t.Run(name, func(t *testing.T) {
			n := startSQLite(t)
			j := journal.New(svc(n), journal.Config{})
			for i := range 5 {
				j.PersistEvent("a", i, event(fmt.Sprintf("e%d", i)))
			}
			j.PersistSnapshot("a", 3, snap("at-3"))
			for _, idx := range []int{6, 1000, math.MaxInt64} {
				err := mustPanic(t, func() { j.PersistSnapshot("a", idx, snap("past")) })
				var je *journal.Error
				if !errors.As(err, &je) || je.Op != "persist snapshot" || errs.CodeOf(err) != errs.FailedPreconditionCode {
					t.Errorf("PersistSnapshot at %d: %v, want a persist-snapshot *journal.Error, FAILED_PRECONDITION", idx, err)
				}
			}
			j.DeleteEvents("a", 3)
			mustPanic(t, func() { j.PersistSnapshot("a", 2, snap("before-the-deletion")) })
			if s, idx, ok := snapshotOf(t, j, "a"); !ok || idx != 3 || s != "at-3" {
				t.Errorf("snapshot = %q at %d (%v), want at-3 at 3", s, idx, ok)
			}
			j.PersistSnapshot("a", 5, snap("at-5"))
			if s, idx, ok := snapshotOf(t, j, "a"); !ok || idx != 5 || s != "at-5" {
				t.Errorf("snapshot = %q at %d (%v), want at-5 at 5", s, idx, ok)
			}
		})
	}
}
