package session_test

import (
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
)

// TestReusedMessageIDWithOtherContentIsRefused: a message id reused with
// other content was acknowledged as a duplicate and the new content
// dropped. Only the same turn again is a retry; anything else is
// ALREADY_EXISTS naming the id, and nothing is stored. Each attempt also
// runs after the session actor was passivated, where only the store knows
// the ids.
func TestReusedMessageIDWithOtherContentIsRefused(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	a, b := ids.New(), ids.New()
	orig := &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{
		{Role: sessionv1.Role_ROLE_USER, Content: "question", MessageId: a},
		{Role: sessionv1.Role_ROLE_ASSISTANT, Content: "answer", MetadataJson: `{"model": "m"}`, MessageId: b},
	}}
	first, err := n.svc.Append(ctx, orig)
	if err != nil {
		t.Fatal(err)
	}
	reuse := []*sessionv1.AppendRequest{
		{SessionId: id, Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "other question", MessageId: a}, orig.Messages[1]}},
		{SessionId: id, Messages: []*sessionv1.NewMessage{orig.Messages[0], {Role: sessionv1.Role_ROLE_ASSISTANT, Content: "answer", MetadataJson: `{"model":"n"}`, MessageId: b}}},
		{SessionId: id, Messages: []*sessionv1.NewMessage{orig.Messages[1], orig.Messages[0]}},
		{SessionId: id, Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_SYSTEM, Content: "question", MessageId: a}, orig.Messages[1]}},
		{SessionId: id, Messages: []*sessionv1.NewMessage{orig.Messages[0], orig.Messages[1], userMsg("new")}},
	}
	for round := 0; round < 2; round++ {
		for i, r := range reuse {
			_, err := n.svc.Append(ctx, r)
			wantCode(t, err, errs.AlreadyExistsCode)
			if !strings.Contains(err.Error(), a) && !strings.Contains(err.Error(), b) {
				t.Fatalf("round %d, reuse %d: %v names neither stored id", round, i, err)
			}
		}
		// The same turn, its metadata spelled otherwise, is the retry.
		again := &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{
			orig.Messages[0], {Role: sessionv1.Role_ROLE_ASSISTANT, Content: "answer", MetadataJson: `{ "model" : "m" }`, MessageId: b},
		}}
		r, err := n.svc.Append(ctx, again)
		if err != nil || !r.GetDuplicate() || !sameAppended(r, first) {
			t.Fatalf("round %d: exact retry answered %v, %v; want the original %v", round, r, err, first)
		}
		ms := n.messages(t, id)
		if len(ms) != 2 || ms[0].GetContent() != "question" || ms[1].GetMetadataJson() != `{"model":"m"}` {
			t.Fatalf("round %d: stored %v", round, ms)
		}
		n.svc.PassivateAll()
		if err := session.WaitNoActors(ctx, n.svc); err != nil {
			t.Fatal(err)
		}
	}
}
