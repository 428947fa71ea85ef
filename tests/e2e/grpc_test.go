package e2e_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestGoClient drives the node with a Go gRPC client: concurrent appends
// to one session get dense, unique sequences in acknowledgement order;
// health, reflection and the HTTP endpoints answer.
func TestGoClient(t *testing.T) {
	n := startNode(t)
	conn := n.conn()
	ctx := ctxT(t)
	sessions := sessionv1.NewSessionServiceClient(conn)

	cr, err := sessions.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "go-client"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	sid := cr.GetSession().GetSessionId()
	const writers, each = 8, 10
	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r, err := sessions.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{
					{Role: sessionv1.Role_ROLE_USER, Content: strings.Repeat("x", w+i)},
				}})
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				m := r.GetMessages()[0]
				mu.Lock()
				if prev, dup := seen[m.GetSequence()]; dup {
					t.Errorf("sequence %d given to %s and %s", m.GetSequence(), prev, m.GetMessageId())
				}
				seen[m.GetSequence()] = m.GetMessageId()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for s := int64(0); s < writers*each; s++ {
		if _, ok := seen[s]; !ok {
			t.Fatalf("sequence %d missing: sequences are not dense", s)
		}
	}
	lm, err := sessions.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid, Limit: 1000})
	if err != nil || len(lm.GetMessages()) != writers*each {
		t.Fatalf("ListMessages: %d messages, %v", len(lm.GetMessages()), err)
	}
	for _, m := range lm.GetMessages() {
		if seen[m.GetSequence()] != m.GetMessageId() {
			t.Fatalf("stored sequence %d is %s, acknowledged as %s", m.GetSequence(), m.GetMessageId(), seen[m.GetSequence()])
		}
	}

	// Health: overall and per service.
	hc := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", "agentstate.session.v1.SessionService", "agentstate.plan.v1.PlanService", "agentstate.audit.v1.AuditService"} {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q: %v, %v", svc, r.GetStatus(), err)
		}
	}

	// Reflection lists the services, so grpcurl needs no .proto files.
	if got := listServices(t, conn); !containsAll(got, "agentstate.session.v1.SessionService", "agentstate.plan.v1.PlanService",
		"agentstate.audit.v1.AuditService", "grpc.health.v1.Health") {
		t.Fatalf("reflection lists %v", got)
	}

	// HTTP: alive, ready, metrics of what just happened.
	if code, body := n.httpGet("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := n.httpGet("/readyz"); code != http.StatusOK || !strings.Contains(body, "ready") {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if _, err := sessions.Get(ctx, &sessionv1.GetSessionRequest{SessionId: "01JDQ70000000000000000000Z"}); status.Code(err) != codes.NotFound {
		t.Fatalf("Get unknown: %v", err)
	}
	_, metrics := n.httpGet("/metrics")
	for _, want := range []string{
		"agentstate_appended_messages_total 80",
		`agentstate_append_turns_total{result="stored"} 80`,
		"agentstate_audit_commit_seconds_count",
		"agentstate_audit_batch_commands_bucket",
		"agentstate_audit_batch_bytes_sum",
		"agentstate_audit_backlog",
		`agentstate_active_actors{kind="session"} 1`,
		`agentstate_active_actors{kind="plan"} 0`,
		`agentstate_errors_total{code="NotFound"} 1`,
		`agentstate_grpc_requests_total{code="OK",method="/agentstate.session.v1.SessionService/Append"} 80`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func listServices(t *testing.T, conn *grpc.ClientConn) []string {
	t.Helper()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	r, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var names []string
	for _, s := range r.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	sort.Strings(names)
	return names
}

func containsAll(have []string, want ...string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}

// TestMalformedRequestsGetTheRightCodes sends bad requests over gRPC: each
// gets its code and a message naming what was wrong, nothing is stored,
// and the node keeps serving.
func TestMalformedRequestsGetTheRightCodes(t *testing.T) {
	n := startNode(t, "--max-recv-bytes", "2097152")
	conn := n.conn()
	ctx := ctxT(t)
	s := sessionv1.NewSessionServiceClient(conn)
	cr, err := s.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "m"})
	if err != nil {
		t.Fatal(err)
	}
	sid := cr.GetSession().GetSessionId()
	closed, err := s.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Close(ctx, &sessionv1.CloseSessionRequest{SessionId: closed.GetSession().GetSessionId()}); err != nil {
		t.Fatal(err)
	}
	user := func(content string) []*sessionv1.NewMessage {
		return []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: content}}
	}
	cases := []struct {
		name    string
		call    func() error
		code    codes.Code
		mention string
	}{
		{"session id not a ULID", func() error {
			_, err := s.Get(ctx, &sessionv1.GetSessionRequest{SessionId: "bogus"})
			return err
		}, codes.InvalidArgument, "session_id"},
		{"unknown session", func() error {
			_, err := s.Append(ctx, &sessionv1.AppendRequest{SessionId: "01JDQ70000000000000000000Z", Messages: user("x")})
			return err
		}, codes.NotFound, "01JDQ70000000000000000000Z"},
		{"no role", func() error {
			_, err := s.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{{Content: "x"}}})
			return err
		}, codes.InvalidArgument, "role"},
		{"metadata not a JSON object", func() error {
			_, err := s.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{
				{Role: sessionv1.Role_ROLE_USER, Content: "x", MetadataJson: "[1]"}}})
			return err
		}, codes.InvalidArgument, "metadata"},
		{"no messages", func() error {
			_, err := s.Append(ctx, &sessionv1.AppendRequest{SessionId: sid})
			return err
		}, codes.InvalidArgument, "messages"},
		{"content over the service limit", func() error {
			_, err := s.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: user(strings.Repeat("a", 1<<20+1))})
			return err
		}, codes.InvalidArgument, "content"},
		{"request over --max-recv-bytes", func() error {
			_, err := s.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: user(strings.Repeat("a", 3<<20))})
			return err
		}, codes.ResourceExhausted, "larger than max"},
		{"closed session", func() error {
			_, err := s.Append(ctx, &sessionv1.AppendRequest{SessionId: closed.GetSession().GetSessionId(), Messages: user("x")})
			return err
		}, codes.FailedPrecondition, "closed"},
		{"same id, other fields", func() error {
			_, err := s.Create(ctx, &sessionv1.CreateSessionRequest{SessionId: sid, ActorName: "someone else"})
			return err
		}, codes.AlreadyExists, sid},
	}
	for _, tc := range cases {
		err := tc.call()
		st, _ := status.FromError(err)
		if st.Code() != tc.code || !strings.Contains(strings.ToLower(st.Message()), strings.ToLower(tc.mention)) {
			t.Errorf("%s: got %v %q, want %v mentioning %q", tc.name, st.Code(), st.Message(), tc.code, tc.mention)
		}
	}
	// Nothing of the failed appends was stored, and the node still serves.
	got, err := s.Get(ctx, &sessionv1.GetSessionRequest{SessionId: sid})
	if err != nil || got.GetSession().GetMessageCount() != 0 {
		t.Fatalf("after the bad requests: %v, %v; want the session with 0 messages", got, err)
	}
	if _, err := s.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: user("fine")}); err != nil {
		t.Fatalf("a good append after the bad ones: %v", err)
	}
}
