package server_test

import (
	"context"
	"io"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/server"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Issue 18 over gRPC: state deltas, GetState, a conditional append whose
// refusal carries the SequenceMismatch detail, "last N" reads.
func TestStateOverGRPC(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Data = t.TempDir() + "/agentstate.db"
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", ""
	cfg.ShutdownTimeout = 10 * time.Second
	log, err := server.NewLogger(io.Discard, "text", "error")
	if err != nil {
		t.Fatal(err)
	}
	n, err := server.Start(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := sessionv1.NewSessionServiceClient(conn)
	cr, err := c.Create(ctx, &sessionv1.CreateSessionRequest{ClientKey: "app/u/s"})
	if err != nil {
		t.Fatal(err)
	}
	id := cr.GetSession().GetSessionId()
	for i, mid := range []string{"e1", "e2", "e3"} {
		if _, err := c.Append(ctx, &sessionv1.AppendRequest{SessionId: id,
			Messages:    []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: mid, MessageId: mid}},
			StateDelta:  &sessionv1.StateDelta{SetJson: map[string]string{"n": string(rune('1' + i))}},
			ScopeDeltas: []*sessionv1.ScopeDelta{{Scope: "app:app", Delta: &sessionv1.StateDelta{SetJson: map[string]string{"seen": `"` + mid + `"`}}}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.GetState(ctx, &sessionv1.GetStateRequest{SessionId: id, Scopes: []string{"app:app"}})
	if err != nil || st.GetStateJson() != `{"n":3}` || st.GetNextSequence() != 3 || st.GetScopes()[0].GetStateJson() != `{"seen":"e3"}` {
		t.Fatalf("GetState: %v %v", st, err)
	}
	one := int64(1)
	_, err = c.Append(ctx, &sessionv1.AppendRequest{SessionId: id, ExpectedNextSequence: &one,
		Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "late"}}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("stale conditional append: %v", err)
	}
	var detail *sessionv1.SequenceMismatch
	for _, d := range status.Convert(err).Details() {
		if m, ok := d.(*sessionv1.SequenceMismatch); ok {
			detail = m
		}
	}
	if detail.GetNextSequence() != 3 || detail.GetExpectedNextSequence() != 1 {
		t.Fatalf("the status carries %v", detail)
	}
	if next, ok := persistence.NextSequenceOf(err); !ok || next != 3 {
		t.Fatalf("NextSequenceOf: %d %v", next, ok)
	}
	l, err := c.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: id, Last: 2})
	if err != nil || len(l.GetMessages()) != 2 || l.GetMessages()[0].GetMessageId() != "e2" {
		t.Fatalf("last 2: %v %v", l, err)
	}
	g, err := c.Get(ctx, &sessionv1.GetSessionRequest{ClientKey: "app/u/s"})
	if err != nil || g.GetSession().GetSessionId() != id {
		t.Fatalf("Get by key: %v %v", g, err)
	}
}
