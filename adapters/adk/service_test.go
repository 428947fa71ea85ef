package adk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/adapters/adk"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/adk/session"
	"google.golang.org/genai"
)

// backend is the ADK service and the raw agentstate API it stores through.
type backend struct {
	svc *adk.Service
	raw adk.Store
}

func eachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	t.Run("embedded", func(t *testing.T) {
		e, _ := openEmbedded(t, dbPath(t))
		test(t, backend{svc: e.Svc, raw: e.Node.Sessions()})
	})
	t.Run("grpc", func(t *testing.T) {
		svc, api, _ := startNode(t, dbPath(t))
		test(t, backend{svc: svc, raw: adk.Remote(api)})
	})
}

func create(t *testing.T, svc session.Service, user, id string, state map[string]any) session.Session {
	t.Helper()
	r, err := svc.Create(t.Context(), &session.CreateRequest{AppName: "app", UserID: user, SessionID: id, State: state})
	if err != nil {
		t.Fatalf("Create %s/%s: %v", user, id, err)
	}
	return r.Session
}

func get(t *testing.T, svc session.Service, user, id string) session.Session {
	t.Helper()
	r, err := svc.Get(t.Context(), &session.GetRequest{AppName: "app", UserID: user, SessionID: id})
	if err != nil {
		t.Fatalf("Get %s/%s: %v", user, id, err)
	}
	return r.Session
}

func event(id string, delta map[string]any) *session.Event {
	return &session.Event{ID: id, Author: "user", InvocationID: "inv", Timestamp: time.Now(),
		Actions: session.EventActions{StateDelta: delta}}
}

// An append through a handle read before another writer's append is
// refused (ADK's stale-session protection) and stores nothing; a handle
// read again appends.
func TestStaleHandleIsRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		create(t, b.svc, "u1", "s1", nil)
		first, second := get(t, b.svc, "u1", "s1"), get(t, b.svc, "u1", "s1")
		if err := b.svc.AppendEvent(t.Context(), first, event("e1", map[string]any{"k": "first"})); err != nil {
			t.Fatal(err)
		}
		err := b.svc.AppendEvent(t.Context(), second, event("e2", map[string]any{"k": "second"}))
		if !errors.Is(err, adk.ErrStaleSession) {
			t.Fatalf("append through the outdated handle: %v; want ErrStaleSession", err)
		}
		now := get(t, b.svc, "u1", "s1")
		if n := now.Events().Len(); n != 1 {
			t.Fatalf("%d events stored; the refused append stored something", n)
		}
		if v, _ := now.State().Get("k"); v != "first" {
			t.Fatalf("state k = %v after a refused append", v)
		}
		// The handle that made the append is current, and so is a fresh one.
		if err := b.svc.AppendEvent(t.Context(), first, event("e3", nil)); err != nil {
			t.Fatalf("the writer's own handle: %v", err)
		}
		if err := b.svc.AppendEvent(t.Context(), get(t, b.svc, "u1", "s1"), event("e2", map[string]any{"k": "second"})); err != nil {
			t.Fatalf("a handle read again: %v", err)
		}
		if v, _ := get(t, b.svc, "u1", "s1").State().Get("k"); v != "second" {
			t.Fatalf("state k = %v", v)
		}
	})
}

// ADK's names are agentstate's: the session is found by its client key in
// the app's namespace, the event is the message with ADK's id; the event's
// delta went to the session's state and the two shared scopes, without its
// temp: key, and the handle kept the temp: key for the invocation.
func TestNamesAndStateAsStored(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		h := create(t, b.svc, "u/1", "s1", map[string]any{"app:plan": "free", "user:lang": "fr", "sk": 1})
		ev := event("event1", map[string]any{"app:k": "a", "user:k": "u", "k": "s", "temp:k": "t"})
		if err := b.svc.AppendEvent(ctx, h, ev); err != nil {
			t.Fatal(err)
		}
		if v, err := h.State().Get("temp:k"); err != nil || v != "t" {
			t.Errorf("the handle's temp:k = %v, %v; want it for the rest of the invocation", v, err)
		}

		got, err := b.raw.Get(ctx, &sessionv1.GetSessionRequest{Namespace: "adk:app", ClientKey: "u%2F1/s1"})
		if err != nil {
			t.Fatalf("the session by its client key: %v", err)
		}
		sid := got.GetSession().GetSessionId()
		if got.GetSession().GetActorName() != "u/1" {
			t.Errorf("actor_name %q; want the user id", got.GetSession().GetActorName())
		}
		msgs, err := b.raw.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs.GetMessages()) != 1 || msgs.GetMessages()[0].GetMessageId() != "event1" {
			t.Fatalf("messages %v; want one, with id event1", msgs.GetMessages())
		}
		if c := msgs.GetMessages()[0].GetContent(); strings.Contains(c, "temp:") {
			t.Errorf("the stored event carries its temp: key: %s", c)
		}
		st, err := b.raw.GetState(ctx, &sessionv1.GetStateRequest{SessionId: sid, Scopes: []string{"app:app", "user:app/u%2F1"}})
		if err != nil {
			t.Fatal(err)
		}
		wantJSON(t, "session state", st.GetStateJson(), map[string]any{"sk": 1.0, "k": "s"})
		if len(st.GetScopes()) != 2 {
			t.Fatalf("scopes %v", st.GetScopes())
		}
		wantJSON(t, "app scope", st.GetScopes()[0].GetStateJson(), map[string]any{"plan": "free", "k": "a"})
		wantJSON(t, "user scope", st.GetScopes()[1].GetStateJson(), map[string]any{"lang": "fr", "k": "u"})
		if st.GetNextSequence() != 1 {
			t.Errorf("next sequence %d", st.GetNextSequence())
		}
	})
}

func wantJSON(t *testing.T, what, got string, want map[string]any) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(got), &m); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Errorf("%s = %v; want %v", what, m, want)
	}
}

// Writers that each hold their own handle of one session and do a
// read-modify-write of its state (a counter) lose no update: an append
// through a handle another writer overtook is refused, and the writer
// reads the session again and retries.
func TestConcurrentHandlesLoseNoUpdate(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		create(t, b.svc, "u1", "s1", map[string]any{"n": 0})
		const writers, each = 4, 8
		var wg sync.WaitGroup
		var refused atomic.Int64
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					for {
						r, err := b.svc.Get(t.Context(), &session.GetRequest{AppName: "app", UserID: "u1", SessionID: "s1", NumRecentEvents: 1})
						if err != nil {
							t.Error(err)
							return
						}
						v, _ := r.Session.State().Get("n")
						err = b.svc.AppendEvent(t.Context(), r.Session, event(fmt.Sprintf("w%d-%d", w, i), map[string]any{"n": v.(float64) + 1}))
						if errors.Is(err, adk.ErrStaleSession) {
							refused.Add(1)
							continue
						}
						if err != nil {
							t.Error(err)
							return
						}
						break
					}
				}
			})
		}
		wg.Wait()
		got := get(t, b.svc, "u1", "s1")
		if v, _ := got.State().Get("n"); v != float64(writers*each) || got.Events().Len() != writers*each {
			t.Fatalf("n = %v with %d events; want %d of each (%d appends were refused)", v, got.Events().Len(), writers*each, refused.Load())
		}
		t.Logf("%d stale appends refused", refused.Load())
	})
}

// A message another client appended to an ADK session reads back as a text
// event of its role.
func TestForeignMessageReadsAsText(t *testing.T) {
	e, _ := openEmbedded(t, dbPath(t))
	create(t, e.Svc, "u1", "s1", nil)
	s, err := e.Node.Sessions().Get(t.Context(), &sessionv1.GetSessionRequest{Namespace: "adk:app", ClientKey: "u1/s1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Node.Sessions().Append(t.Context(), &sessionv1.AppendRequest{SessionId: s.GetSession().GetSessionId(),
		Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "hello from the CLI", MessageId: "cli-1"}}}); err != nil {
		t.Fatal(err)
	}
	got := get(t, e.Svc, "u1", "s1")
	ev := got.Events().At(0)
	if got.Events().Len() != 1 || ev.ID != "cli-1" || ev.Author != "user" || ev.Content.Parts[0].Text != "hello from the CLI" ||
		ev.Content.Role != genai.RoleUser {
		t.Fatalf("the foreign message as an event: %+v", ev)
	}
}

// NumRecentEvents beyond what one server "last N" read returns (1000) pages
// the events instead, and still returns exactly the last N.
func TestManyRecentEvents(t *testing.T) {
	e, _ := openEmbedded(t, "memory:"+t.Name())
	h := create(t, e.Svc, "u1", "s1", nil)
	const n = 1005
	for i := range n {
		if err := e.Svc.AppendEvent(t.Context(), h, event(fmt.Sprintf("e%d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := e.Svc.Get(t.Context(), &session.GetRequest{AppName: "app", UserID: "u1", SessionID: "s1", NumRecentEvents: 1002})
	if err != nil {
		t.Fatal(err)
	}
	if evs := r.Session.Events(); evs.Len() != 1002 || evs.At(0).ID != "e3" || evs.At(1001).ID != "e1004" {
		t.Fatalf("%d events, from %v", evs.Len(), evs.At(0))
	}
}

// racing is a Store whose first ListMessages is preceded by another
// writer's append: the append lands between Get's read of the state and
// its read of the events.
type racing struct {
	adk.Store
	once  sync.Once
	race  func()
	lists atomic.Int64
}

func (r *racing) ListMessages(ctx context.Context, req *sessionv1.ListMessagesRequest) (*sessionv1.ListMessagesResponse, error) {
	r.once.Do(r.race)
	r.lists.Add(1)
	return r.Store.ListMessages(ctx, req)
}

// A Get that races an append returns events and state of one moment, and
// a handle whose next sequence is that moment's: a "last N" read is made
// again and includes the new event; a full read leaves the new event out,
// and its handle, outdated, is refused as stale.
func TestGetRacingAnAppendIsConsistent(t *testing.T) {
	for _, last := range []int{2, 0} {
		t.Run(fmt.Sprintf("last=%d", last), func(t *testing.T) {
			e, _ := openEmbedded(t, dbPath(t))
			h := create(t, e.Svc, "u1", "s1", nil)
			for i := range 3 {
				if err := e.Svc.AppendEvent(t.Context(), h, event(fmt.Sprintf("e%d", i), map[string]any{"k": i})); err != nil {
					t.Fatal(err)
				}
			}
			r := &racing{Store: e.Node.Sessions(), race: func() {
				if err := e.Svc.AppendEvent(t.Context(), h, event("racer", map[string]any{"k": "racer"})); err != nil {
					t.Error(err)
				}
			}}
			svc := adk.New(r, adk.Options{})
			got, err := svc.Get(t.Context(), &session.GetRequest{AppName: "app", UserID: "u1", SessionID: "s1", NumRecentEvents: last})
			if err != nil {
				t.Fatal(err)
			}
			evs := got.Session.Events()
			k, _ := got.Session.State().Get("k")
			lastID := evs.At(evs.Len() - 1).ID
			switch last {
			case 2:
				if evs.Len() != 2 || lastID != "racer" || k != "racer" || r.lists.Load() != 2 {
					t.Fatalf("events %d ending %s, k = %v, %d reads; want the read made again, with the racer", evs.Len(), lastID, k, r.lists.Load())
				}
				if err := svc.AppendEvent(t.Context(), got.Session, event("after", nil)); err != nil {
					t.Fatalf("append through the handle: %v", err)
				}
			case 0:
				if evs.Len() != 3 || lastID != "e2" || k != float64(2) {
					t.Fatalf("events %d ending %s, k = %v; want the moment before the racer", evs.Len(), lastID, k)
				}
				if err := svc.AppendEvent(t.Context(), got.Session, event("after", nil)); !errors.Is(err, adk.ErrStaleSession) {
					t.Fatalf("append through the outdated handle: %v; want ErrStaleSession", err)
				}
			}
		})
	}
}

// Options.SessionTTL gives each created session agentstate's expiry.
func TestSessionTTL(t *testing.T) {
	e, _ := openEmbedded(t, dbPath(t))
	svc := adk.New(e.Node.Sessions(), adk.Options{SessionTTL: time.Hour})
	before := time.Now()
	create(t, svc, "u1", "s1", nil)
	s, err := e.Node.Sessions().Get(t.Context(), &sessionv1.GetSessionRequest{Namespace: "adk:app", ClientKey: "u1/s1"})
	if err != nil {
		t.Fatal(err)
	}
	exp := s.GetSession().GetExpiresAt().AsTime()
	if exp.Before(before.Add(time.Hour)) || exp.After(time.Now().Add(time.Hour)) {
		t.Fatalf("expires_at %v; want an hour after the create", exp)
	}
	create(t, e.Svc, "u1", "s2", nil)
	s, err = e.Node.Sessions().Get(t.Context(), &sessionv1.GetSessionRequest{Namespace: "adk:app", ClientKey: "u1/s2"})
	if err != nil || s.GetSession().GetExpiresAt() != nil {
		t.Fatalf("without a TTL: expires_at %v, %v", s.GetSession().GetExpiresAt(), err)
	}
}

// AppendEvent takes only the sessions this service returned: a nil
// session and another service's session are refused, and nothing is
// stored.
func TestAppendRefusesForeignSessions(t *testing.T) {
	e, _ := openEmbedded(t, dbPath(t))
	mine := create(t, e.Svc, "u1", "s1", nil)
	if err := e.Svc.AppendEvent(t.Context(), nil, event("e1", nil)); err == nil || !strings.Contains(err.Error(), "session is nil") {
		t.Fatalf("AppendEvent(nil session) = %v; want a nil-session error", err)
	}
	foreign := create(t, session.InMemoryService(), "u1", "s1", nil)
	err := e.Svc.AppendEvent(t.Context(), foreign, event("e1", nil))
	if err == nil || !strings.Contains(err.Error(), "unexpected session type") {
		t.Fatalf("AppendEvent(in-memory session) = %v; want an unexpected-type error", err)
	}
	if n := get(t, e.Svc, "u1", "s1").Events().Len(); n != 0 || mine.Events().Len() != 0 {
		t.Fatalf("%d events stored after refused appends; want 0", n)
	}
}
