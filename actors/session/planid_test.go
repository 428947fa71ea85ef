package session_test

import (
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
)

// A session links the plans the plan service records, so LinkPlan and an
// import hold plan ids to the plan service's rule (ids.CheckPlanID), not
// to the ULID rule of the ids agentstate makes: a plan id the planning
// system made (not a ULID) is linked, exported and imported, and a bad one
// is refused with the rule's own text.
func TestPlanIDsFollowThePlanServicesRule(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	const planID = "plan:2026.v1-a_b"
	if _, err := n.svc.LinkPlan(ctx, &sessionv1.LinkPlanRequest{SessionId: id,
		Plan: &sessionv1.LinkedPlan{PlanId: planID, Phase: "execute", State: "running"}}); err != nil {
		t.Fatalf("LinkPlan of plan id %q: %v", planID, err)
	}
	for _, bad := range []string{"", "a b", strings.Repeat("p", ids.MaxPlanIDBytes+1)} {
		_, err := n.svc.LinkPlan(ctx, &sessionv1.LinkPlanRequest{SessionId: id, Plan: &sessionv1.LinkedPlan{PlanId: bad}})
		wantCode(t, err, errs.InvalidArgumentCode)
		if want := errs.From(ids.CheckPlanID("plan.plan_id", bad)).Msg; errs.From(err).Msg != want {
			t.Errorf("LinkPlan of %q says %q, want %q", bad, errs.From(err).Msg, want)
		}
	}

	ex, err := n.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	im, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: ex.GetData()})
	if err != nil {
		t.Fatalf("import of a session linked to plan %q: %v", planID, err)
	}
	links := n.get(t, im.GetSession().GetSessionId()).GetLinkedPlans()
	if len(links) != 1 || links[0].GetPlanId() != planID {
		t.Fatalf("imported links %v, want plan %q", links, planID)
	}
}
