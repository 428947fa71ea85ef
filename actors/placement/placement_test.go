package placement_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/placement"
	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/session"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"
)

// oneMember starts a one-member cluster (one remote per test process: the
// library's remotes race with each other) hosting the kinds of node, whose
// façades route through the returned Router.
type oneMember struct {
	node    *actors.Node
	router  *placement.Router
	cluster *cluster.Cluster
	sys     *actor.ActorSystem
	store   *sqlite.Store
}

func startOneMember(t *testing.T, extra ...*cluster.Kind) *oneMember {
	t.Helper()
	return startMember(t, extra)
}

// startMember is startOneMember with options for the member's remote.
func startMember(t *testing.T, extra []*cluster.Kind, ropts ...remote.ConfigOption) *oneMember {
	t.Helper()
	return startMemberWith(t, extra, nil, ropts...)
}

// startMemberWith is startMember with options for the member's cluster too.
func startMemberWith(t *testing.T, extra []*cluster.Kind, copts []cluster.ConfigOption, ropts ...remote.ConfigOption) *oneMember {
	t.Helper()
	store, err := sqlite.Open("memory:" + strings.ReplaceAll(t.Name(), "/", "-"))
	if err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	router := placement.NewRouter(placement.RouterConfig{})
	node, err := actors.Start(sys, store, actors.Config{
		Sessions: session.Config{Router: router, IdleTimeout: time.Hour},
		Plans:    plan.Config{Router: router, IdleTimeout: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	copts = append([]cluster.ConfigOption{
		cluster.WithKinds(append(placement.Kinds(node.Sessions(), node.Plans()), extra...)...),
		cluster.WithRequestTimeout(placement.DefaultRequestTimeout),
	}, copts...)
	cfg := cluster.Configure("placement-test", test.NewTestProvider(test.NewInMemAgent()), disthash.New(),
		remote.Configure("127.0.0.1", 0, ropts...), copts...)
	c := cluster.New(sys, cfg)
	c.StartMember()
	router.Bind(c)
	m := &oneMember{node: node, router: router, cluster: c, sys: sys, store: store}
	t.Cleanup(func() {
		// protoactor-go reads its member list without a lock when an
		// activation terminates (disthash's placement actor broadcasts
		// ActivationTerminated) and writes it when the provider
		// deregisters this member at the start of Shutdown. Poisoning the
		// placement actor first, and waiting for it, puts every such read
		// before that write (TestActivationStoppingAtShutdown). Shutdown
		// stops the placement actor again, which is harmless (it already
		// does so twice).
		c.IdentityLookup.Shutdown()
		c.Shutdown(true)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := node.Stop(ctx); err != nil {
			t.Error(err)
		}
		store.Close()
	})
	return m
}

func TestClusterKindsServeFacadeAndRemoteSenders(t *testing.T) {
	m := startOneMember(t)
	ctx := context.Background()
	s := m.node.Sessions()

	created, err := s.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "t"})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetSession().GetSessionId()
	if err := ids.Check("session_id", id); err != nil {
		t.Fatalf("create through the cluster gave id %q: %v", id, err)
	}
	mids := []string{ids.New(), ids.New(), ids.New()}
	for i := range 3 {
		_, err := s.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{
			{MessageId: mids[i], Content: fmt.Sprintf("hello %d", i), Role: sessionv1.Role_ROLE_USER},
		}})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	// A replay of m1 is idempotent through the cluster too.
	if _, err := s.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{
		{MessageId: mids[1], Content: "hello 1", Role: sessionv1.Role_ROLE_USER},
	}}); err != nil {
		t.Fatalf("replayed append: %v", err)
	}
	list, err := s.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetMessages()); n != 3 {
		t.Fatalf("stored %d messages, want 3", n)
	}
	for i, msg := range list.GetMessages() {
		if msg.GetSequence() != int64(i) {
			t.Fatalf("message %d has seq %d", i, msg.GetSequence())
		}
	}
	// The owner lives as a cluster activation, not in the directory.
	if n := s.ActiveActors(); n != 1 {
		t.Fatalf("%d live session actors, want 1", n)
	}

	// A bare request through cluster.Request reaches the same actor and
	// is validated there; an error comes back as a *commonv1.Error.
	raw, err := m.cluster.Request(id, session.ClusterKind, &sessionv1.AppendRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := raw.(*commonv1.Error); !ok {
		t.Fatalf("empty append answered %T, want a *commonv1.Error", raw)
	} else if c := errs.CodeOf(errs.FromProto(e)); c != errs.InvalidArgumentCode {
		t.Fatalf("empty append answered %v, want INVALID_ARGUMENT", e)
	}
	// A request naming another session is refused by the actor.
	other := ids.New()
	raw, err = m.cluster.Request(id, session.ClusterKind, &sessionv1.CloseSessionRequest{SessionId: other})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := raw.(*sessionv1.CloseSessionResponse); ok {
		t.Fatal("the actor of one session closed another")
	}

	// Not found is final, not retried until the deadline.
	_, err = s.Close(ctx, &sessionv1.CloseSessionRequest{SessionId: other})
	if errs.CodeOf(err) != errs.NotFoundCode {
		t.Fatalf("closing a missing session: %v, want NOT_FOUND", err)
	}

	// Plans route the same way.
	p := m.node.Plans()
	planID := ids.New()
	r1, err := p.RecordError(ctx, &planv1.RecordErrorRequest{PlanId: planID, Phase: planv1.Phase_PHASE_ACTION, StepId: "s", ErrorType: "timeout", Message: "boom"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := p.RecordError(ctx, &planv1.RecordErrorRequest{PlanId: planID, Phase: planv1.Phase_PHASE_ACTION, StepId: "s", ErrorType: "timeout", Message: "boom"})
	if err != nil {
		t.Fatal(err)
	}
	if r2.GetRecord().GetSequence() != r1.GetRecord().GetSequence()+1 {
		t.Fatalf("plan sequences %d then %d", r1.GetRecord().GetSequence(), r2.GetRecord().GetSequence())
	}
}

// A second owner of the same session, in another directory of the same
// process (as a member that activated it after a rejoin would be), takes a
// newer epoch: the cluster's activation is fenced, its write stores
// nothing, and the router's retry reaches a fresh activation. Every
// message is stored exactly once, in order.
func TestDoubleActivationIsFencedAndRetried(t *testing.T) {
	m := startOneMember(t)
	ctx := context.Background()
	s := m.node.Sessions()
	created, err := s.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "t"})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetSession().GetSessionId()
	label := map[string]string{} // message id -> label
	appendVia := func(svc *session.Service, l string) error {
		mid := ids.New()
		label[mid] = l
		_, err := svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{
			{MessageId: mid, Content: l, Role: sessionv1.Role_ROLE_USER},
		}})
		return err
	}
	if err := appendVia(s, "a1"); err != nil {
		t.Fatal(err)
	}
	// The rogue: a directory-based service on the same writer.
	rogue, err := session.Start(m.sys, m.node.Writer(), m.store.Reader(), session.Config{Name: "rogue-sessions"})
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Stop(context.Background())
	if err := appendVia(rogue, "r1"); err != nil {
		t.Fatal(err)
	}
	before := m.router.Retries()
	if err := appendVia(s, "a2"); err != nil {
		t.Fatalf("the cluster side did not recover from being fenced: %v", err)
	}
	if m.router.Retries() == before {
		t.Fatal("the cluster's old activation wrote after a newer one activated: it was not fenced")
	}
	if n := s.FencedActivations(); n != 1 {
		t.Fatalf("%d fenced session activations counted, want 1", n)
	}
	// Now the rogue is the older activation: its write is refused.
	err = appendVia(rogue, "r2")
	if errs.CodeOf(err) != errs.UnavailableCode || !strings.Contains(err.Error(), "newer activation") {
		t.Fatalf("the older activation's write: %v, want the fencing error", err)
	}
	list, err := s.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, msg := range list.GetMessages() {
		if msg.GetSequence() != int64(i) {
			t.Fatalf("gap or duplicate: message %d has seq %d", i, msg.GetSequence())
		}
		got = append(got, label[msg.GetMessageId()])
	}
	if want := "a1,r1,a2"; strings.Join(got, ",") != want {
		t.Fatalf("stored %v, want %s", got, want)
	}
}

// TestClusterKindsServeReadsLikeTheDirectory: a read sent to a cluster
// activation gets the answer the local directory gives (they once refused
// it: `session "" cannot serve ListMessagesRequest`), and a request an
// activation cannot serve is refused naming what was wrong.
func TestClusterKindsServeReadsLikeTheDirectory(t *testing.T) {
	m := startOneMember(t)
	ctx := context.Background()
	created, err := m.node.Sessions().Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	sid := created.GetSession().GetSessionId()
	if _, err := m.node.Sessions().Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{
		{Role: sessionv1.Role_ROLE_USER, Content: "one"}, {Role: sessionv1.Role_ROLE_ASSISTANT, Content: "two"},
	}}); err != nil {
		t.Fatal(err)
	}
	pid := ids.New()
	if _, err := m.node.Plans().RecordError(ctx, &planv1.RecordErrorRequest{PlanId: pid, Phase: planv1.Phase_PHASE_EXECUTE,
		StepId: "s", ErrorType: "TimeoutError", Message: "slow"}); err != nil {
		t.Fatal(err)
	}
	ask := func(what string, kind, identity string, req proto.Message) proto.Message {
		t.Helper()
		var (
			res any
			err error
		)
		if kind == "" {
			dir := m.node.Sessions().PID()
			if _, ok := req.(interface{ GetPlanId() string }); ok {
				dir = m.node.Plans().PID()
			}
			res, err = m.sys.Root.RequestFuture(dir, req, 10*time.Second).Result()
		} else {
			res, err = m.cluster.Request(identity, kind, req)
		}
		if err != nil {
			t.Fatalf("%s %T: %v", what, req, err)
		}
		return res.(proto.Message)
	}
	for _, tc := range []struct {
		kind, identity string
		req            proto.Message
	}{
		{session.ClusterKind, sid, &sessionv1.GetSessionRequest{SessionId: sid}},
		{session.ClusterKind, sid, &sessionv1.ListMessagesRequest{SessionId: sid}},
		{session.ClusterKind, sid, &sessionv1.ListSessionsRequest{}},
		{plan.ClusterKind, pid, &planv1.HistoryRequest{PlanId: pid}},
		{plan.ClusterKind, pid, &planv1.ErrorDetailsRequest{PlanId: pid}},
	} {
		local := ask("directory", "", "", tc.req)
		if _, isErr := local.(*commonv1.Error); isErr {
			t.Fatalf("the directory refused %T: %v", tc.req, local)
		}
		activation := ask("activation", tc.kind, tc.identity, tc.req)
		if !proto.Equal(local, activation) {
			t.Errorf("%T: the activation answered %v; the directory %v", tc.req, activation, local)
		}
	}

	other := ids.New()
	for _, tc := range []struct {
		kind, identity string
		req            proto.Message
		want           []string
	}{
		{session.ClusterKind, sid, &sessionv1.CloseSessionRequest{SessionId: other}, []string{sid, other, "CloseSessionRequest"}},
		{session.ClusterKind, sid, &planv1.HistoryRequest{PlanId: pid}, []string{"sessions service cannot serve", "HistoryRequest"}},
		{plan.ClusterKind, pid, &planv1.SetPolicyRequest{PlanId: other, MaxRetries: 1}, []string{pid, other, "SetPolicyRequest"}},
		{plan.ClusterKind, pid, &sessionv1.GetSessionRequest{SessionId: sid}, []string{"plans service cannot serve", "GetSessionRequest"}},
	} {
		e, ok := ask("activation", tc.kind, tc.identity, tc.req).(*commonv1.Error)
		if !ok || e.GetCode() != errs.InvalidArgumentCode {
			t.Errorf("%T to %s %s: answered %v, want INVALID_ARGUMENT", tc.req, tc.kind, tc.identity, e)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(e.GetMessage(), w) || strings.Contains(e.GetMessage(), `""`) {
				t.Errorf("%T to %s %s: %q should name %q (and no empty id)", tc.req, tc.kind, tc.identity, e.GetMessage(), w)
			}
		}
	}
}
