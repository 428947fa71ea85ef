package adk_test

import (
	"errors"
	"testing"
	"time"

	adk1 "github.com/agentstate/agentstate/adapters/adk"
	"github.com/agentstate/agentstate/adapters/adk/internal/adkstore"
	"github.com/agentstate/agentstate/adapters/adk/internal/testnode"
	adk "github.com/agentstate/agentstate/adapters/adk/v2"
	"github.com/google/go-cmp/cmp"
	session1 "google.golang.org/adk/session"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"
)

// The shared store splits state by ADK's prefixes; both versions must
// still spell them the same.
func TestStatePrefixesAreADKs(t *testing.T) {
	for _, p := range [][3]string{
		{adkstore.PrefixApp, session.KeyPrefixApp, session1.KeyPrefixApp},
		{adkstore.PrefixUser, session.KeyPrefixUser, session1.KeyPrefixUser},
		{adkstore.PrefixTemp, session.KeyPrefixTemp, session1.KeyPrefixTemp},
	} {
		if p[0] != p[1] || p[0] != p[2] {
			t.Errorf("state prefix %q: v2 has %q, v1 %q", p[0], p[1], p[2])
		}
	}
}

// v1 and v2 side by side on one node: each reads the other's sessions,
// events and state; v2's workflow fields survive a v2 round trip; and a
// handle of one version is refused as stale after the other appended.
func TestVersionsShareSessions(t *testing.T) {
	api, _ := testnode.Start(t, testnode.DBPath(t))
	v1 := adk1.New(adk1.Remote(api), adk1.Options{})
	v2 := adk.New(adk.Remote(api), adk.Options{})
	ctx := t.Context()
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

	c1, err := v1.Create(ctx, &session1.CreateRequest{AppName: "app", UserID: "u", SessionID: "s",
		State: map[string]any{"user:lang": "fr"}})
	if err != nil {
		t.Fatal(err)
	}
	first := &session1.Event{ID: "e1", Author: "user", InvocationID: "inv1", Timestamp: at,
		Actions: session1.EventActions{StateDelta: map[string]any{"topic": "trains"}}}
	first.Content = genai.NewContentFromText("hello", genai.RoleUser)
	if err := v1.AppendEvent(ctx, c1.Session, first); err != nil {
		t.Fatal(err)
	}

	g2, err := v2.Get(ctx, &session.GetRequest{AppName: "app", UserID: "u", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if n := g2.Session.Events().Len(); n != 1 {
		t.Fatalf("v2 reads %d events of v1's session; want 1", n)
	}
	got := g2.Session.Events().At(0)
	if got.ID != "e1" || got.InvocationID != "inv1" || got.Author != "user" || !got.Timestamp.Equal(at) ||
		got.Content.Parts[0].Text != "hello" || got.Actions.StateDelta["topic"] != "trains" {
		t.Fatalf("v2 reads v1's event as %+v", got)
	}
	for k, want := range map[string]any{"user:lang": "fr", "topic": "trains"} {
		if v, _ := g2.Session.State().Get(k); v != want {
			t.Errorf("v2 reads state %s = %v; want %v", k, v, want)
		}
	}

	second := &session.Event{ID: "e2", Author: "agent", InvocationID: "inv2", Timestamp: at.Add(time.Second),
		IsolationScope: "scope", Routes: []string{"next"}, Output: map[string]any{"n": 1.0},
		NodeInfo:       &session.NodeInfo{Path: "wf/a@1", OutputFor: []string{"wf"}},
		RequestedInput: &session.RequestInput{InterruptID: "ask-1", Message: "approve?"},
		Actions:        session.EventActions{StateDelta: map[string]any{"app:n": 2.0, "temp:x": 1.0}}}
	if err := v2.AppendEvent(ctx, g2.Session, second); err != nil {
		t.Fatal(err)
	}
	if err := v1.AppendEvent(ctx, c1.Session, &session1.Event{ID: "e3", Author: "user"}); !errors.Is(err, adk1.ErrStaleSession) {
		t.Fatalf("v1 append through a handle v2 overtook: %v; want ErrStaleSession", err)
	}

	again, err := v2.Get(ctx, &session.GetRequest{AppName: "app", UserID: "u", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	back := again.Session.Events().At(1)
	want := *second
	want.Actions.StateDelta = map[string]any{"app:n": 2.0} // temp: keys are never stored
	if d := cmp.Diff(&want, back); d != "" {
		t.Errorf("v2's event read back by v2 (-want +got):\n%s", d)
	}

	g1, err := v1.Get(ctx, &session1.GetRequest{AppName: "app", UserID: "u", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if n := g1.Session.Events().Len(); n != 2 {
		t.Fatalf("v1 reads %d events; want 2", n)
	}
	if e := g1.Session.Events().At(1); e.ID != "e2" || e.InvocationID != "inv2" || e.Author != "agent" || e.Actions.StateDelta["app:n"] != 2.0 {
		t.Errorf("v1 reads v2's event as %+v", e)
	}
	if v, _ := g1.Session.State().Get("app:n"); v != 2.0 {
		t.Errorf("v1 reads app:n = %v; want 2", v)
	}
}
