package session_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/agentstate/agentstate/actors/session"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
)

func TestCreateIsIdempotentByID(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)

	r, err := n.svc.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "coder", MetadataJson: `{ "k" : 1 }`})
	if err != nil {
		t.Fatal(err)
	}
	s := r.GetSession()
	if !r.GetCreated() || ids.Check("session_id", s.GetSessionId()) != nil {
		t.Fatalf("create: %v", r)
	}
	if s.GetNamespace() != "local" || s.GetMetadataJson() != `{"k":1}` || s.GetState() != sessionv1.SessionState_SESSION_STATE_ACTIVE {
		t.Fatalf("defaults not applied: %v", s)
	}
	if got := n.get(t, s.GetSessionId()); got.GetActorName() != "coder" || got.GetMessageCount() != 0 {
		t.Fatalf("get after create: %v", got)
	}

	again, err := n.svc.Create(ctx, &sessionv1.CreateSessionRequest{SessionId: s.GetSessionId(), ActorName: "coder", MetadataJson: `{"k":1}`})
	if err != nil {
		t.Fatalf("idempotent create: %v", err)
	}
	if again.GetCreated() || again.GetSession().GetSessionId() != s.GetSessionId() {
		t.Fatalf("idempotent create answered %v", again)
	}

	_, err = n.svc.Create(ctx, &sessionv1.CreateSessionRequest{SessionId: s.GetSessionId(), ActorName: "other"})
	wantCode(t, err, errs.AlreadyExistsCode)

	// A client-chosen id that is new is created with it.
	id := ids.New()
	r2, err := n.svc.Create(ctx, &sessionv1.CreateSessionRequest{SessionId: id, ActorName: "a", Namespace: "ns"})
	if err != nil || !r2.GetCreated() || r2.GetSession().GetSessionId() != id {
		t.Fatalf("create with id: %v %v", r2, err)
	}
}

func TestValidationErrorsStoreNothing(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{MaxContentBytes: 64, MaxTurnMessages: 3}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	mid := ids.New()

	cases := []struct {
		name string
		req  *sessionv1.AppendRequest
		want errs.Code
	}{
		{"empty session id", &sessionv1.AppendRequest{Messages: []*sessionv1.NewMessage{userMsg("x")}}, errs.InvalidArgumentCode},
		{"malformed session id", &sessionv1.AppendRequest{SessionId: "not-a-ulid", Messages: []*sessionv1.NewMessage{userMsg("x")}}, errs.InvalidArgumentCode},
		{"lower-case session id", &sessionv1.AppendRequest{SessionId: strings.ToLower(id), Messages: []*sessionv1.NewMessage{userMsg("x")}}, errs.InvalidArgumentCode},
		{"no messages", &sessionv1.AppendRequest{SessionId: id}, errs.InvalidArgumentCode},
		{"too many messages", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("1"), userMsg("2"), userMsg("3"), userMsg("4")}}, errs.InvalidArgumentCode},
		{"unspecified role", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("ok"), {Content: "x"}}}, errs.InvalidArgumentCode},
		{"unknown role", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{{Role: 99, Content: "x"}}}, errs.InvalidArgumentCode},
		{"content over the limit", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("ok"), userMsg(strings.Repeat("x", 65))}}, errs.InvalidArgumentCode},
		{"invalid UTF-8", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("ok"), userMsg("bad \xff")}}, errs.InvalidArgumentCode},
		// PostgreSQL text cannot hold NUL; both stores refuse it up front so that
		// one caller's NUL never fails the turns coalesced with it.
		{"NUL in content", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("ok"), userMsg("nul \x00 byte")}}, errs.InvalidArgumentCode},
		{"NUL in a scope name", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("ok")},
			ScopeDeltas: []*sessionv1.ScopeDelta{{Scope: "app:\x00", Delta: &sessionv1.StateDelta{SetJson: map[string]string{"k": "1"}}}}}, errs.InvalidArgumentCode},
		{"NUL in a state key", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("ok")},
			StateDelta: &sessionv1.StateDelta{SetJson: map[string]string{"k\x00": "1"}}}, errs.InvalidArgumentCode},
		{"metadata an array", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_TOOL, Content: "x", MetadataJson: `[1]`}}}, errs.InvalidArgumentCode},
		{"metadata not JSON", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_TOOL, Content: "x", MetadataJson: `{"a":`}}}, errs.InvalidArgumentCode},
		// A client's own id may be any printable ASCII without spaces
		// (1-128 bytes); neither a ULID nor that is refused.
		{"malformed message id", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, MessageId: "m 1"}}}, errs.InvalidArgumentCode},
		{"message id too long", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, MessageId: strings.Repeat("m", 129)}}}, errs.InvalidArgumentCode},
		{"message id twice", &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_USER, MessageId: mid}, {Role: sessionv1.Role_ROLE_ASSISTANT, MessageId: mid}}}, errs.InvalidArgumentCode},
		{"unknown session", &sessionv1.AppendRequest{SessionId: ids.New(), Messages: []*sessionv1.NewMessage{userMsg("x")}}, errs.NotFoundCode},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := n.svc.Append(ctx, c.req)
			wantCode(t, err, c.want)
		})
	}
	if msgs := n.messages(t, id); len(msgs) != 0 {
		t.Fatalf("refused appends stored %d messages", len(msgs))
	}
	if got := n.get(t, id).GetMessageCount(); got != 0 {
		t.Fatalf("message_count %d after refused appends", got)
	}

	// The other write calls validate too.
	_, err := n.svc.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "a", MetadataJson: `"str"`})
	wantCode(t, err, errs.InvalidArgumentCode)
	_, err = n.svc.Create(ctx, &sessionv1.CreateSessionRequest{SessionId: "x"})
	wantCode(t, err, errs.InvalidArgumentCode)
	_, err = n.svc.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: id, InputTokens: -1})
	wantCode(t, err, errs.InvalidArgumentCode)
	_, err = n.svc.LinkPlan(ctx, &sessionv1.LinkPlanRequest{SessionId: id, Plan: &sessionv1.LinkedPlan{PlanId: "p q"}})
	wantCode(t, err, errs.InvalidArgumentCode)
	_, err = n.svc.Close(ctx, &sessionv1.CloseSessionRequest{SessionId: ""})
	wantCode(t, err, errs.InvalidArgumentCode)
	_, err = n.svc.Get(ctx, &sessionv1.GetSessionRequest{SessionId: ids.New()})
	wantCode(t, err, errs.NotFoundCode)
	_, err = n.svc.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: ids.New()})
	wantCode(t, err, errs.NotFoundCode)
	_, err = n.svc.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: id, FromSequence: -1})
	wantCode(t, err, errs.InvalidArgumentCode)
	_, err = n.svc.List(ctx, &sessionv1.ListSessionsRequest{Cursor: "nope"})
	wantCode(t, err, errs.InvalidArgumentCode)
}

func TestAppendTurnAndRead(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	r, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{
		userMsg("question"),
		{Role: sessionv1.Role_ROLE_ASSISTANT, Content: "answer", MetadataJson: `{"model": "m"}`},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetMessages()) != 2 || r.GetMessages()[0].GetSequence() != 0 || r.GetMessages()[1].GetSequence() != 1 || r.GetDuplicate() {
		t.Fatalf("append answered %v", r)
	}
	msgs := n.messages(t, id)
	checkDense(t, msgs)
	if len(msgs) != 2 || msgs[1].GetContent() != "answer" || msgs[1].GetMetadataJson() != `{"model":"m"}` ||
		msgs[1].GetMessageId() != r.GetMessages()[1].GetMessageId() || !msgs[1].GetCreatedAt().AsTime().Equal(r.GetMessages()[1].GetCreatedAt().AsTime()) {
		t.Fatalf("stored %v", msgs)
	}
	if got := n.get(t, id); got.GetMessageCount() != 2 || !got.GetUpdatedAt().AsTime().After(got.GetCreatedAt().AsTime()) && !got.GetUpdatedAt().AsTime().Equal(r.GetMessages()[0].GetCreatedAt().AsTime()) {
		t.Fatalf("session after append: %v", got)
	}
}

func TestCloseRefusesAppendsNotReads(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("before")}}); err != nil {
		t.Fatal(err)
	}
	c, err := n.svc.Close(ctx, &sessionv1.CloseSessionRequest{SessionId: id})
	if err != nil || c.GetSession().GetState() != sessionv1.SessionState_SESSION_STATE_CLOSED || c.GetSession().GetClosedAt() == nil {
		t.Fatalf("close: %v %v", c, err)
	}
	_, err = n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("after")}})
	wantCode(t, err, errs.FailedPreconditionCode)
	if got := n.get(t, id); got.GetState() != sessionv1.SessionState_SESSION_STATE_CLOSED || got.GetMessageCount() != 1 {
		t.Fatalf("get after close: %v", got)
	}
	if msgs := n.messages(t, id); len(msgs) != 1 || msgs[0].GetContent() != "before" {
		t.Fatalf("messages after close: %v", msgs)
	}
	// Closing again is a no-op; the state survives reactivation.
	if _, err := n.svc.Close(ctx, &sessionv1.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	n.svc.PassivateAll()
	if err := session.WaitNoActors(ctx, n.svc); err != nil {
		t.Fatal(err)
	}
	_, err = n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("after")}})
	wantCode(t, err, errs.FailedPreconditionCode)
}

// An append queued behind a close is decided after it: refused.
func TestAppendQueuedBehindCloseIsRefused(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	id := n.create(t, "a")
	closeF := n.sys.Root.RequestFuture(n.svc.PID(), &sessionv1.CloseSessionRequest{SessionId: id}, time30s)
	appendF := n.sys.Root.RequestFuture(n.svc.PID(), &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("late")}}, time30s)
	if r, err := closeF.Result(); err != nil {
		t.Fatal(err)
	} else if _, ok := r.(*sessionv1.CloseSessionResponse); !ok {
		t.Fatalf("close answered %T %v", r, r)
	}
	r, err := appendF.Result()
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, remoteErr(t, r), errs.FailedPreconditionCode)
	if msgs := n.messages(t, id); len(msgs) != 0 {
		t.Fatalf("stored %v", msgs)
	}
}

func TestDeleteReportsAndKeepsPlans(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	for i := 0; i < 5; i++ {
		if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("m")}}); err != nil {
			t.Fatal(err)
		}
	}
	p1, p2 := ids.New(), ids.New()
	// p1 is a plan with stored state of its own; it must outlive the session.
	res, err := n.wr.Apply(ctx, &persistence.PlanWrite{PlanID: p1, Records: []*planv1.ErrorRecord{}})
	if err != nil || res.Err != nil {
		t.Fatalf("plan write: %v %v", err, res.Err)
	}
	for _, p := range []string{p1, p2} {
		if _, err := n.svc.LinkPlan(ctx, &sessionv1.LinkPlanRequest{SessionId: id, Plan: &sessionv1.LinkedPlan{PlanId: p, Phase: "execute", State: "running"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Relinking replaces, in place.
	l, err := n.svc.LinkPlan(ctx, &sessionv1.LinkPlanRequest{SessionId: id, Plan: &sessionv1.LinkedPlan{PlanId: p1, Phase: "review", State: "done"}})
	if err != nil {
		t.Fatal(err)
	}
	got := n.get(t, id).GetLinkedPlans()
	if len(got) != 2 || got[0].GetPlanId() != p1 || got[0].GetPhase() != "review" || got[1].GetPlanId() != p2 {
		t.Fatalf("links in Get: %v", got)
	}
	if lp := l.GetSession().GetLinkedPlans(); len(lp) != 2 || lp[0].GetState() != "done" {
		t.Fatalf("links in LinkPlan's answer: %v", lp)
	}

	d, err := n.svc.Delete(ctx, &sessionv1.DeleteSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetMessagesRemoved() != 5 || len(d.GetPlansOrphaned()) != 2 || d.GetPlansOrphaned()[0] != p1 || d.GetPlansOrphaned()[1] != p2 {
		t.Fatalf("delete answered %v", d)
	}
	_, err = n.svc.Get(ctx, &sessionv1.GetSessionRequest{SessionId: id})
	wantCode(t, err, errs.NotFoundCode)
	_, err = n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("m")}})
	wantCode(t, err, errs.NotFoundCode)
	_, err = n.svc.Delete(ctx, &sessionv1.DeleteSessionRequest{SessionId: id})
	wantCode(t, err, errs.NotFoundCode)
	if _, err := n.store.Reader().GetPlan(ctx, "", p1); err != nil {
		t.Fatalf("the linked plan did not survive its session: %v", err)
	}
}

func TestTokenUsageHasNoLostUpdates(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	const senders, each = 64, 20
	var wg sync.WaitGroup
	errc := make(chan error, senders)
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := n.svc.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: id, InputTokens: 1, OutputTokens: 2, Cost: 0.25}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	want := &sessionv1.TokenUsage{InputTokens: senders * each, OutputTokens: 2 * senders * each, Cost: 0.25 * senders * each}
	last, err := n.svc.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	tu := n.get(t, id).GetTokenUsage()
	for _, got := range []*sessionv1.TokenUsage{last.GetTotal(), tu} {
		if got.GetInputTokens() != want.InputTokens || got.GetOutputTokens() != want.OutputTokens || got.GetCost() != want.Cost {
			t.Fatalf("totals %v, want %v", got, want)
		}
	}
}

func TestListPagesAndFilters(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	var alpha []string
	for i := 0; i < 25; i++ {
		actor := "beta"
		if i%2 == 0 {
			actor = "alpha"
		}
		id := n.create(t, actor)
		if actor == "alpha" {
			alpha = append(alpha, id)
		}
	}
	if _, err := n.svc.Close(ctx, &sessionv1.CloseSessionRequest{SessionId: alpha[0]}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		r, err := n.svc.List(ctx, &sessionv1.ListSessionsRequest{ActorName: "alpha", Limit: 5, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.GetSessions() {
			seen = append(seen, s.GetSessionId())
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		if cursor = r.GetNextCursor(); cursor == "" {
			break
		}
	}
	if strings.Join(seen, ",") != strings.Join(alpha, ",") {
		t.Fatalf("paged alpha sessions\n got %v\nwant %v", seen, alpha)
	}
	r, err := n.svc.List(ctx, &sessionv1.ListSessionsRequest{ActorName: "alpha", State: sessionv1.SessionState_SESSION_STATE_CLOSED})
	if err != nil || len(r.GetSessions()) != 1 || r.GetSessions()[0].GetSessionId() != alpha[0] || r.GetNextCursor() != "" {
		t.Fatalf("closed alpha: %v %v", r, err)
	}
	r, err = n.svc.List(ctx, &sessionv1.ListSessionsRequest{Namespace: "local"})
	if err != nil || len(r.GetSessions()) != 25 {
		t.Fatalf("namespace local: %d %v", len(r.GetSessions()), err)
	}
}

// A ListMessages cursor stays valid while appends continue.
func TestListMessagesCursorUnderAppends(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	const total = 200
	done := make(chan error, 1)
	go func() {
		for i := 0; i < total; i++ {
			if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("m")}}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var read []*sessionv1.Message
	from := int64(0)
	appending := true
	for appending || int64(len(read)) < total {
		if appending {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				appending = false
			default:
			}
		}
		r, err := n.svc.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: id, FromSequence: from, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		if !appending && len(r.GetMessages()) == 0 && int64(len(read)) < total {
			t.Fatalf("read %d of %d", len(read), total)
		}
		read = append(read, r.GetMessages()...)
		from = r.GetNextSequence()
	}
	checkDense(t, read)
}

// A repeated message id is found in long turns too, wherever it is.
func TestRepeatedMessageIDInLongTurn(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	for _, size := range []int{2, 16, 17, 40} {
		req := &sessionv1.AppendRequest{SessionId: id}
		for i := 0; i < size; i++ {
			req.Messages = append(req.Messages, &sessionv1.NewMessage{Role: sessionv1.Role_ROLE_USER, MessageId: ids.New()})
		}
		req.Messages[size-1].MessageId = req.Messages[size/2-1].MessageId
		_, err := n.svc.Append(ctx, req)
		wantCode(t, err, errs.InvalidArgumentCode)
		if !strings.Contains(err.Error(), "repeats") {
			t.Fatalf("size %d: %v", size, err)
		}
	}
	if got := n.get(t, id).GetMessageCount(); got != 0 {
		t.Fatalf("stored %d messages", got)
	}
}
