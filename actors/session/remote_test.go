package session_test

import (
	"testing"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

// Remote Proto.Actor senders send bare requests to the directory and get
// the response or a *commonv1.Error; a future stands in for them here.
func TestRemoteStyleRequests(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{MaxContentBytes: 32}, nil)
	ask := func(msg proto.Message) any {
		t.Helper()
		r, err := n.sys.Root.RequestFuture(n.svc.PID(), msg, time30s).Result()
		if err != nil {
			t.Fatalf("%T: %v", msg, err)
		}
		return r
	}
	if n.svc.PID().GetId() != session.DirectoryName {
		t.Fatalf("directory is named %q", n.svc.PID().GetId())
	}

	cr, ok := ask(&sessionv1.CreateSessionRequest{ActorName: "remote"}).(*sessionv1.CreateSessionResponse)
	if !ok || !cr.GetCreated() || cr.GetSession().GetNamespace() != "local" {
		t.Fatalf("create answered %v", cr)
	}
	id := cr.GetSession().GetSessionId()
	mid := ids.New()
	ap, ok := ask(&sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{
		{Role: sessionv1.Role_ROLE_USER, Content: "hi", MessageId: mid}, userMsg("there")}}).(*sessionv1.AppendResponse)
	if !ok || len(ap.GetMessages()) != 2 || ap.GetMessages()[0].GetMessageId() != mid || ap.GetMessages()[1].GetSequence() != 1 {
		t.Fatalf("append answered %v", ap)
	}
	if g, ok := ask(&sessionv1.GetSessionRequest{SessionId: id}).(*sessionv1.GetSessionResponse); !ok || g.GetSession().GetMessageCount() != 2 {
		t.Fatalf("get answered %v", g)
	}
	if l, ok := ask(&sessionv1.ListMessagesRequest{SessionId: id}).(*sessionv1.ListMessagesResponse); !ok || len(l.GetMessages()) != 2 || l.GetNextSequence() != 2 {
		t.Fatalf("list messages answered %v", l)
	}
	if l, ok := ask(&sessionv1.ListSessionsRequest{ActorName: "remote"}).(*sessionv1.ListSessionsResponse); !ok || len(l.GetSessions()) != 1 {
		t.Fatalf("list answered %v", l)
	}
	if u, ok := ask(&sessionv1.UpdateTokenUsageRequest{SessionId: id, InputTokens: 5}).(*sessionv1.UpdateTokenUsageResponse); !ok || u.GetTotal().GetInputTokens() != 5 {
		t.Fatalf("token usage answered %v", u)
	}
	if lp, ok := ask(&sessionv1.LinkPlanRequest{SessionId: id, Plan: &sessionv1.LinkedPlan{PlanId: ids.New()}}).(*sessionv1.LinkPlanResponse); !ok || len(lp.GetSession().GetLinkedPlans()) != 1 {
		t.Fatalf("link answered %v", lp)
	}
	ex, ok := ask(&sessionv1.ExportSessionRequest{SessionId: id}).(*sessionv1.ExportSessionResponse)
	if !ok {
		t.Fatalf("export answered %v", ex)
	}
	if im, ok := ask(&sessionv1.ImportSessionRequest{Data: ex.GetData()}).(*sessionv1.ImportSessionResponse); !ok || im.GetMessagesImported() != 2 {
		t.Fatalf("import answered %v", im)
	}
	if c, ok := ask(&sessionv1.CloseSessionRequest{SessionId: id}).(*sessionv1.CloseSessionResponse); !ok || c.GetSession().GetState() != sessionv1.SessionState_SESSION_STATE_CLOSED {
		t.Fatalf("close answered %v", c)
	}

	// Errors come back typed. Remote requests skip the façade, so the
	// session actor validates them itself.
	for _, c := range []struct {
		msg  proto.Message
		want errs.Code
	}{
		{&sessionv1.AppendRequest{SessionId: "bad", Messages: []*sessionv1.NewMessage{userMsg("x")}}, errs.InvalidArgumentCode},
		{&sessionv1.AppendRequest{SessionId: ids.New(), Messages: []*sessionv1.NewMessage{{Role: 42}}}, errs.InvalidArgumentCode},
		{&sessionv1.AppendRequest{SessionId: ids.New(), Messages: []*sessionv1.NewMessage{userMsg("x")}}, errs.NotFoundCode},
		{&sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("x")}}, errs.FailedPreconditionCode},
		{&sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("this content is longer than thirty-two bytes")}}, errs.InvalidArgumentCode},
		{&sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, MetadataJson: "1"}}}, errs.InvalidArgumentCode},
		{&sessionv1.CreateSessionRequest{SessionId: id, ActorName: "someone else"}, errs.AlreadyExistsCode},
		{&sessionv1.UpdateTokenUsageRequest{SessionId: id, Cost: -1}, errs.InvalidArgumentCode},
		{&sessionv1.GetSessionRequest{SessionId: ids.New()}, errs.NotFoundCode},
		{&sessionv1.ImportSessionRequest{Data: "{}"}, errs.InvalidArgumentCode},
		{&sessionv1.ExportSessionRequest{SessionId: "x"}, errs.InvalidArgumentCode},
		{&sessionv1.AppendResponse{}, errs.InvalidArgumentCode}, // not a request
	} {
		wantCode(t, remoteErr(t, ask(c.msg)), c.want)
	}
	if msgs := n.messages(t, id); len(msgs) != 2 {
		t.Fatalf("refused remote requests changed the session: %d messages", len(msgs))
	}
}

// Issue 18's requests reach the owner and the readers from remote senders
// too, validated by the session actor; a refused conditional append's
// current sequence survives the trip in the error's message.
func TestRemoteStyleStateRequests(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ask := func(msg proto.Message) any {
		t.Helper()
		r, err := n.sys.Root.RequestFuture(n.svc.PID(), msg, time30s).Result()
		if err != nil {
			t.Fatalf("%T: %v", msg, err)
		}
		return r
	}
	cr := ask(&sessionv1.CreateSessionRequest{ClientKey: "remote-key"}).(*sessionv1.CreateSessionResponse)
	id := cr.GetSession().GetSessionId()
	if u, ok := ask(&sessionv1.UpdateStateRequest{SessionId: id, StateDelta: delta("a", "1")}).(*sessionv1.UpdateStateResponse); !ok || u.GetStateJson() != `{"a":1}` {
		t.Fatalf("update state answered %v", u)
	}
	if g, ok := ask(&sessionv1.GetStateRequest{SessionId: id}).(*sessionv1.GetStateResponse); !ok || g.GetStateJson() != `{"a":1}` {
		t.Fatalf("get state answered %v", g)
	}
	if g, ok := ask(&sessionv1.GetSessionRequest{ClientKey: "remote-key"}).(*sessionv1.GetSessionResponse); !ok || g.GetSession().GetSessionId() != id {
		t.Fatalf("get by key answered %v", g)
	}
	if _, ok := ask(&sessionv1.PutSnapshotRequest{SessionId: id, Sequence: -1, Data: []byte("s")}).(*sessionv1.PutSnapshotResponse); !ok {
		t.Fatal("put snapshot refused")
	}
	if s, ok := ask(&sessionv1.GetSnapshotRequest{SessionId: id}).(*sessionv1.GetSnapshotResponse); !ok || string(s.GetSnapshot().GetData()) != "s" {
		t.Fatalf("get snapshot answered %v", s)
	}
	five := int64(5)
	err := remoteErr(t, ask(&sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("x")}, ExpectedNextSequence: &five}))
	wantCode(t, err, errs.FailedPreconditionCode)
	if next, ok := persistence.NextSequenceOf(err); !ok || next != 0 {
		t.Fatalf("next sequence from a remote refusal: %d %v (%v)", next, ok, err)
	}
	wantCode(t, remoteErr(t, ask(&sessionv1.UpdateStateRequest{SessionId: id, StateDelta: delta("a", "{")})), errs.InvalidArgumentCode)
	wantCode(t, remoteErr(t, ask(&sessionv1.TruncateRequest{SessionId: id, ThroughSequence: -1})), errs.InvalidArgumentCode)
	if tr, ok := ask(&sessionv1.TruncateRequest{SessionId: id, ThroughSequence: 3}).(*sessionv1.TruncateResponse); !ok || tr.GetMessagesRemoved() != 0 {
		t.Fatalf("truncate answered %v", tr)
	}
}
