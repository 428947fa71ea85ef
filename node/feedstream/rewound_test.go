package feedstream_test

import (
	"testing"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/feedstream"
)

// Over gRPC, a tail gets a replacement's Rewound event at the cut, then
// the new messages from there once.
func TestTailSessionStreamsRewound(t *testing.T) {
	h := newHarness(t, feedstream.Limits{})
	id := h.session(4, 10)
	st, err := feedv1.NewFeedServiceClient(h.dial(false)).TailSession(h.ctx, &feedv1.TailSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() *feedv1.SessionEvent {
		t.Helper()
		ev, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	for i := range 4 {
		if m := recv().GetMessage(); m.GetSequence() != int64(i) {
			t.Fatalf("message %d: %v", i, m)
		}
	}
	next := int64(4)
	if _, err := h.node.Sessions().ReplaceSuffix(h.ctx, &sessionv1.ReplaceSuffixRequest{SessionId: id, ExpectedNextSequence: &next,
		From:     &sessionv1.ReplaceSuffixRequest_FromSequence{FromSequence: 1},
		Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "new"}}}); err != nil {
		t.Fatal(err)
	}
	if r := recv().GetRewound(); r.GetFromSequence() != 1 || r.GetPreviousNextSequence() != 4 {
		t.Fatalf("want Rewound{1, 4}, got %v", r)
	}
	if m := recv().GetMessage(); m.GetSequence() != 1 || m.GetContent() != "new" {
		t.Fatalf("after the rewind: %v", m)
	}
}
