package e2e_test

import (
	"testing"

	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
)

// TestAppendBatches drives a node's AppendBatches with the generated
// client: one batch of appends to two sessions, one of them invalid, and a
// retry of a stored message id. Each append gets its own outcome under its
// tag; the valid ones are stored densely, the invalid one is refused
// without costing the others, and the retry answers the original sequence.
func TestAppendBatches(t *testing.T) {
	n := startNode(t)
	ctx := ctxT(t)
	sessions := sessionv1.NewSessionServiceClient(n.conn())
	var sids [2]string
	for i := range sids {
		cr, err := sessions.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "batches"})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		sids[i] = cr.GetSession().GetSessionId()
	}
	stream, err := sessions.AppendBatches(ctx)
	if err != nil {
		t.Fatalf("AppendBatches: %v", err)
	}
	const each = 20
	ids0 := map[uint64]string{} // tag → message id, valid appends
	batch := &sessionv1.AppendBatch{}
	for i := range 2 * each {
		id := ids.New()
		tag := uint64(i + 1)
		ids0[tag] = id
		batch.Appends = append(batch.Appends, &sessionv1.TaggedAppend{Tag: tag, Request: &sessionv1.AppendRequest{
			SessionId: sids[i%2], Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "m", MessageId: id}},
		}})
	}
	const badTag = 1000
	batch.Appends = append(batch.Appends, &sessionv1.TaggedAppend{Tag: badTag, Request: &sessionv1.AppendRequest{
		SessionId: sids[0], Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role(99), Content: "m"}},
	}})
	if err := stream.Send(batch); err != nil {
		t.Fatalf("Send: %v", err)
	}
	outcomes := map[uint64]*sessionv1.AppendStreamResponse{}
	for len(outcomes) < len(batch.Appends) {
		msg, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv after %d outcomes: %v", len(outcomes), err)
		}
		for _, o := range msg.GetOutcomes() {
			if _, dup := outcomes[o.GetTag()]; dup {
				t.Fatalf("tag %d answered twice", o.GetTag())
			}
			outcomes[o.GetTag()] = o.GetOutcome()
		}
	}
	if code := outcomes[badTag].GetError().GetCode(); code != commonv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT {
		t.Fatalf("invalid append answered %v, want INVALID_ARGUMENT", outcomes[badTag])
	}
	acked := map[string]int64{}
	for tag, id := range ids0 {
		r := outcomes[tag].GetResponse()
		if r == nil || len(r.GetMessages()) != 1 || r.GetMessages()[0].GetMessageId() != id {
			t.Fatalf("tag %d (%s) answered %v", tag, id, outcomes[tag])
		}
		acked[id] = r.GetMessages()[0].GetSequence()
	}
	for _, sid := range sids {
		lm, err := sessions.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid, Limit: 1000})
		if err != nil {
			t.Fatalf("ListMessages: %v", err)
		}
		if len(lm.GetMessages()) != each {
			t.Fatalf("session %s stores %d messages, want %d", sid, len(lm.GetMessages()), each)
		}
		for i, m := range lm.GetMessages() {
			if m.GetSequence() != int64(i) || acked[m.GetMessageId()] != m.GetSequence() {
				t.Fatalf("stored %s at %d (read position %d), acknowledged at %d", m.GetMessageId(), m.GetSequence(), i, acked[m.GetMessageId()])
			}
		}
	}

	// A retry of a stored append, on the same stream, answers the original.
	retry := batch.Appends[0]
	if err := stream.Send(&sessionv1.AppendBatch{Appends: []*sessionv1.TaggedAppend{{Tag: 2000, Request: retry.GetRequest()}}}); err != nil {
		t.Fatalf("Send retry: %v", err)
	}
	msg, err := stream.Recv()
	if err != nil {
		t.Fatalf("Recv retry: %v", err)
	}
	r := msg.GetOutcomes()[0].GetOutcome().GetResponse()
	if !r.GetDuplicate() || r.GetMessages()[0].GetSequence() != acked[ids0[retry.GetTag()]] {
		t.Fatalf("retry answered %v, want the original sequence %d as a duplicate", r, acked[ids0[retry.GetTag()]])
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the stream went on after the client closed its side")
	}
}
