package postgres

import (
	"context"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

// ownedSessions activates and creates n sessions through a (epoch 1).
func ownedSessions(a *node, n int) []string {
	a.t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = ids.New()
		a.ok(&persistence.Activate{Kind: persistence.OwnerSession, ID: out[i]})
		a.ok(&persistence.CreateSession{Epoch: 1, Session: newSession(out[i])})
	}
	return out
}

func appendCmd(id string, next int64, ms ...*sessionv1.Message) *persistence.AppendMessages {
	return &persistence.AppendMessages{Epoch: 1, SessionID: id, NextSequence: next,
		Turns: []persistence.Turn{{Messages: ms, Audit: []*auditv1.AuditEntry{entry("message_appended")}}}}
}

// A batch of appends and updates that all hold commits through the
// pipeline, without a replay, and its results are what is stored.
func TestPipelinedBatchCommitsWithoutReplay(t *testing.T) {
	a, _ := twoNodes(t)
	ss := ownedSessions(a, 4)
	var batch []persistence.Command
	for i, id := range ss {
		batch = append(batch, appendCmd(id, 0, message("x"), message("y")))
		if i%2 == 0 {
			// A second append to the same session in the same batch sees
			// the first one's rows.
			batch = append(batch, appendCmd(id, 2, message("z")))
		}
		batch = append(batch, &persistence.UpdateSession{Epoch: 1, SessionID: id,
			TokenDelta: &sessionv1.TokenUsage{InputTokens: 3}, LinkPlan: &sessionv1.LinkedPlan{PlanId: "p"}})
	}
	batch = append(batch, &persistence.RecordAudit{Entries: []*auditv1.AuditEntry{entry("a")}})
	before := a.store.replays
	res := a.apply(batch...)
	if a.store.replays != before {
		t.Fatalf("a batch whose commands all hold was replayed")
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("command %d: %v", i, r.Err)
		}
	}
	for i, cmd := range batch {
		c, ok := cmd.(*persistence.AppendMessages)
		if !ok {
			continue
		}
		stored, err := a.store.Reader().ListMessages(context.Background(), c.SessionID, c.NextSequence, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := c.ResultOf(res[i])
		got := out.Turns[0].Messages
		for j, m := range got {
			if !proto.Equal(m, stored[j]) {
				t.Fatalf("command %d: result %v, stored %v", i, m, stored[j])
			}
		}
		if out.NextSequence != c.NextSequence+int64(len(got)) {
			t.Fatalf("command %d: next sequence %d", i, out.NextSequence)
		}
	}
	for i, id := range ss {
		s, err := a.store.Reader().GetSession(context.Background(), id)
		want := int64(2)
		if i%2 == 0 {
			want = 3
		}
		if err != nil || s.MessageCount != want || s.TokenUsage.InputTokens != 3 || len(s.LinkedPlans) != 1 {
			t.Fatalf("session %d: %v %v", i, s, err)
		}
	}
	verifyChain(t, a.store.Reader())
}

// When a pipelined command does not hold, the batch is replayed command by
// command, and each gets its real result.
func TestPipelineFailureReplaysCommandByCommand(t *testing.T) {
	a, _ := twoNodes(t)
	ss := ownedSessions(a, 3)
	orig := message("original")
	fc := appendCmd(ss[1], 0, orig)
	first := fc.ResultOf(a.ok(fc))
	retry := proto.Clone(orig).(*sessionv1.Message)
	good1, good2 := message("good"), message("good too")
	retried := appendCmd(ss[1], 1, retry) // a retried turn: duplicate
	batch := []persistence.Command{
		appendCmd(ss[0], 0, good1),
		appendCmd(ss[2], 5, message("stale")), // the next sequence is 0
		retried,
		&persistence.UpdateSession{SessionID: ids.New(), TokenDelta: &sessionv1.TokenUsage{InputTokens: 1}}, // unfenced, missing
		&persistence.UpdateSession{Epoch: 2, SessionID: ss[0]},                                              // fenced: never that epoch
		appendCmd(ss[0], 1, good2),
	}
	before := a.store.replays
	res := a.apply(batch...)
	if a.store.replays != before+1 {
		t.Fatalf("%d replays, want 1", a.store.replays-before)
	}
	if res[0].Err != nil || res[5].Err != nil {
		t.Fatalf("good appends: %v, %v", res[0].Err, res[5].Err)
	}
	if errs.CodeOf(res[1].Err) != errs.FailedPreconditionCode {
		t.Fatalf("stale append: %v", res[1].Err)
	}
	if tr := retried.ResultOf(res[2]).Turns[0]; res[2].Err != nil || !tr.Duplicate || !proto.Equal(tr.Messages[0], first.Turns[0].Messages[0]) {
		t.Fatalf("retried turn: %v %+v", res[2].Err, tr)
	}
	if errs.CodeOf(res[3].Err) != errs.NotFoundCode {
		t.Fatalf("update of a missing session: %v", res[3].Err)
	}
	if errs.CodeOf(res[4].Err) != errs.FailedPreconditionCode {
		t.Fatalf("update of a future epoch: %v", res[4].Err)
	}
	ms, _ := a.store.Reader().ListMessages(context.Background(), ss[0], 0, 0)
	if len(ms) != 2 || ms[0].Content != "good" || ms[1].Content != "good too" {
		t.Fatalf("messages of session 0: %v", ms)
	}
	if s, _ := a.store.Reader().GetSession(context.Background(), ss[2]); s.MessageCount != 0 {
		t.Fatalf("the stale append stored %d messages", s.MessageCount)
	}
	// Entries: the first append's, the two good appends'.
	if n := len(verifyChain(t, a.store.Reader())); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
}
