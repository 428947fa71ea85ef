package plan_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/plan"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"google.golang.org/protobuf/proto"
)

// Remote senders send bare planv1 requests to the directory's PID and get
// the response, or a *commonv1.Error, back at their own PID.
func TestRemoteStyleRequests(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	ask := func(msg proto.Message) any {
		t.Helper()
		resp, err := h.sys.Root.RequestFuture(h.svc.PID(), msg, 10*time.Second).Result()
		if err != nil {
			t.Fatalf("%T: %v", msg, err)
		}
		return resp
	}
	rec, ok := ask(timeoutOn("remote-plan", execute, "s")).(*planv1.RecordErrorResponse)
	if !ok || rec.GetRecord().GetSequence() != 0 || rec.GetRecord().GetRecoveryAction() != retry {
		t.Fatalf("RecordError: %v", rec)
	}
	if pol, ok := ask(&planv1.SetPolicyRequest{PlanId: "remote-plan", MaxRetries: 7}).(*planv1.SetPolicyResponse); !ok || pol.GetMaxRetries() != 7 {
		t.Fatalf("SetPolicy: %v", pol)
	}
	if suc, ok := ask(&planv1.RecordSuccessRequest{PlanId: "remote-plan", Phase: execute, StepId: "s"}).(*planv1.RecordSuccessResponse); !ok || suc.GetPreviousRetryCount() != 1 {
		t.Fatalf("RecordSuccess: %v", suc)
	}
	if m, ok := ask(&planv1.MergeErrorDetailsRequest{PlanId: "remote-plan", DetailsJson: `{"k":1}`}).(*planv1.MergeErrorDetailsResponse); !ok || m.GetDetailsJson() == "" {
		t.Fatalf("MergeErrorDetails: %v", m)
	}
	hist, ok := ask(&planv1.HistoryRequest{PlanId: "remote-plan"}).(*planv1.HistoryResponse)
	if !ok || len(hist.GetRecords()) != 1 || !proto.Equal(hist.GetRecords()[0], rec.GetRecord()) {
		t.Fatalf("History: %v", hist)
	}
	det, ok := ask(&planv1.ErrorDetailsRequest{PlanId: "remote-plan"}).(*planv1.ErrorDetailsResponse)
	if !ok || det.GetMaxRetries() != 7 || det.GetDetails().GetErrorCategory() != transient {
		t.Fatalf("ErrorDetails: %v", det)
	}
	for _, bad := range []proto.Message{
		&planv1.RecordErrorRequest{PlanId: "remote-plan", Phase: execute},
		&planv1.RecordErrorRequest{PlanId: "bad id"},
		&planv1.HistoryRequest{PlanId: "remote-plan", Limit: -3},
		&commonv1.Error{},
	} {
		e, ok := ask(bad).(*commonv1.Error)
		if !ok || e.GetCode() != commonv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT {
			t.Errorf("%T %v: got %v; want an INVALID_ARGUMENT *commonv1.Error", bad, bad, e)
		}
	}
}

// An idle plan actor passivates itself; the next request reloads the plan.
func TestIdlePassivation(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{IdleTimeout: 20 * time.Millisecond})
	record(t, h.svc, timeoutOn("idle", execute, "s"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := plan.WaitNoActors(ctx, h.svc); err != nil {
		t.Fatalf("the idle plan actor did not passivate: %v", err)
	}
	if r := record(t, h.svc, timeoutOn("idle", execute, "s")); r.GetSequence() != 1 || r.GetRetryCount() != 2 {
		t.Fatalf("after idle passivation: sequence %d retry_count %d; want 1 2", r.GetSequence(), r.GetRetryCount())
	}
}

// A passivation storm: with a 1 ms idle timeout, plan owners passivate
// between almost every two requests while 16 senders record errors of one
// step on 8 plans. Every plan's history stays dense, each record's retry
// count is its sequence + 1 (no record lost, none counted twice across
// reactivations), owners did come and go, and the race detector stays
// clean (the owners' idle timer is the project's own; issue 15).
func TestPassivationStormWithAVeryShortIdleTimeout(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{IdleTimeout: time.Millisecond})
	const plans, senders, each = 8, 16, 40
	var wg sync.WaitGroup
	errc := make(chan error, senders)
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := fmt.Sprintf("storm-%d", (g+i)%plans)
				if _, err := h.svc.RecordError(ctxT(t), timeoutOn(id, execute, "s")); err != nil {
					errc <- fmt.Errorf("sender %d record %d: %w", g, i, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	total := 0
	for p := 0; p < plans; p++ {
		recs := history(t, h.svc, fmt.Sprintf("storm-%d", p))
		for i, r := range recs {
			if r.GetSequence() != int64(i) || r.GetRetryCount() != int32(i+1) {
				t.Fatalf("plan storm-%d record %d: sequence %d retry_count %d", p, i, r.GetSequence(), r.GetRetryCount())
			}
		}
		total += len(recs)
	}
	if total != senders*each {
		t.Fatalf("%d records stored, want %d", total, senders*each)
	}
	if act := plan.Activations(h.svc); act <= plans {
		t.Fatalf("%d activations for %d plans: no owner passivated in the storm", act, plans)
	}
	t.Logf("%d activations for %d plans", plan.Activations(h.svc), plans)
}
