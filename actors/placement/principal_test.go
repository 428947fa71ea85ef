package placement_test

import (
	"context"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/principal"
)

// A request routed through the cluster carries its principal to the owner
// (in the envelope's header), whose entries name it: the session's and the
// plan's, as on a node without a cluster.
func TestRoutedRequestsKeepTheirPrincipal(t *testing.T) {
	m := startOneMember(t)
	ctx := principal.With(context.Background(), "alice")
	cr, err := m.node.Sessions().Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "t", Namespace: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	plan := ids.New()
	if _, err := m.node.Plans().RecordError(ctx, &planv1.RecordErrorRequest{PlanId: plan, Phase: planv1.Phase_PHASE_EXECUTE,
		StepId: "s", ErrorType: "TimeoutError", Message: "slow"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*auditv1.Filter{{SessionId: cr.GetSession().GetSessionId()}, {PlanId: plan}} {
		es, err := m.store.Reader().ListAudit(context.Background(), f, "", 10)
		if err != nil || len(es) == 0 {
			t.Fatalf("entries of %v: %v %v", f, es, err)
		}
		for _, e := range es {
			if e.GetPrincipal() != "alice" {
				t.Errorf("%s entry names principal %q, want alice", e.GetEventType(), e.GetPrincipal())
			}
		}
	}
}
