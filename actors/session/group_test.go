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
