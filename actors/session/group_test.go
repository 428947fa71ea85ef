package session_test

import (
	"slices"
	"testing"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// TestDeleteSessionsByPrefix: the group goes whole; its live owners do not
// answer from what they held afterwards (a create of the same id makes a
// new session); other sessions stay.
func TestDeleteSessionsByPrefix(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{ExpirySweepInterval: -1}, nil)
	ctx := ctxT(t)
	create := func(ns, key string) string {
		r, err := n.svc.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "g", Namespace: ns, ClientKey: key})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetSession().GetSessionId()
	}
	a, b, keep := create("", "th/1/a"), create("", "th/1/b"), create("", "th/2")
	other := create("ns2", "th/1/a")
	if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: a, Messages: []*sessionv1.NewMessage{userMsg("x")}}); err != nil {
		t.Fatal(err)
	}
	r, err := n.svc.DeleteSessions(ctx, &sessionv1.DeleteSessionsRequest{ClientKeyPrefix: "th/1/"})
	want := []string{a, b}
	slices.Sort(want)
	if err != nil || !slices.Equal(r.GetSessionIds(), want) || r.GetMessagesRemoved() != 1 {
		t.Fatalf("delete: %v %v, want %v", r, err, want)
	}
	for _, id := range want {
		_, err := n.svc.Get(ctx, &sessionv1.GetSessionRequest{SessionId: id})
		wantCode(t, err, errs.NotFoundCode)
	}
	n.get(t, keep)
	n.get(t, other)
	// The owner of a held it with a message: a create of its id is new.
	c, err := n.svc.Create(ctx, &sessionv1.CreateSessionRequest{SessionId: a, ActorName: "g2"})
	if err != nil || !c.GetCreated() || c.GetSession().GetMessageCount() != 0 {
		t.Fatalf("create after the group delete: %v %v", c, err)
	}
	_, err = n.svc.DeleteSessions(ctx, &sessionv1.DeleteSessionsRequest{})
	wantCode(t, err, errs.InvalidArgumentCode)
}

func TestUpdateScopesWithoutASession(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{ExpirySweepInterval: -1}, nil)
	ctx := ctxT(t)
	d := func(scope, k, v string) *sessionv1.ScopeDelta {
		return &sessionv1.ScopeDelta{Scope: scope, Delta: &sessionv1.StateDelta{SetJson: map[string]string{k: v}}}
	}
	req := &sessionv1.UpdateScopesRequest{RequestId: "op-1", ScopeDeltas: []*sessionv1.ScopeDelta{d("app:a", "x", "1"), d("user:a/u", "y", "2"), d("app:a", "z", "3")}}
	r, err := n.svc.UpdateScopes(ctx, req)
	if err != nil || r.GetDuplicate() || len(r.GetScopes()) != 2 || r.GetScopes()[0].GetScope() != "app:a" {
		t.Fatalf("update: %v %v", r, err)
	}
	// Another write in between; the retry answers the scopes as they stand.
	if _, err := n.svc.UpdateScopes(ctx, &sessionv1.UpdateScopesRequest{ScopeDeltas: []*sessionv1.ScopeDelta{d("app:a", "w", "4")}}); err != nil {
		t.Fatal(err)
	}
	again, err := n.svc.UpdateScopes(ctx, req)
	if err != nil || !again.GetDuplicate() || len(again.GetScopes()) != 2 {
		t.Fatalf("retry: %v %v", again, err)
	}
	st, err := n.svc.GetState(ctx, &sessionv1.GetStateRequest{SessionId: n.create(t, "s"), Scopes: []string{"app:a"}})
	if err != nil || len(st.GetScopes()) != 1 || st.GetScopes()[0].GetStateJson() != `{"w":4,"x":1,"z":3}` {
		t.Fatalf("state: %v %v", st, err)
	}
	if st.GetScopes()[0].GetStateJson() != again.GetScopes()[0].GetStateJson() {
		t.Fatalf("the retry answered %v", again.GetScopes()[0])
	}
	_, err = n.svc.UpdateScopes(ctx, &sessionv1.UpdateScopesRequest{RequestId: "op-1", ScopeDeltas: []*sessionv1.ScopeDelta{d("app:a", "x", "9"), d("user:a/u", "y", "2"), d("app:a", "z", "3")}})
	wantCode(t, err, errs.AlreadyExistsCode)
	_, err = n.svc.UpdateScopes(ctx, &sessionv1.UpdateScopesRequest{})
	wantCode(t, err, errs.InvalidArgumentCode)
	_, err = n.svc.UpdateScopes(ctx, &sessionv1.UpdateScopesRequest{RequestId: "bad id", ScopeDeltas: req.ScopeDeltas})
	wantCode(t, err, errs.InvalidArgumentCode)
}
