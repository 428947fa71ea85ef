package plan_test

import (
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/plan"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
)

// TestClusterKindPoisonedWithWriteInFlight poisons a cluster-kind plan
// actor while its write is in the writer, as the cluster does when a
// topology change moves the plan to another member. The write commits, so
// its caller must get the record, never an UNAVAILABLE (which
// placement.Router retries as "nothing stored": the record would be stored
// twice); a request arriving after the poison stored nothing and gets
// UNAVAILABLE; the actor then stops.
func TestClusterKindPoisonedWithWriteInFlight(t *testing.T) {
	h := newHarness(t, inMemory, plan.Config{})
	const id = "moving-plan"
	root := h.sys.Root
	pid := root.Spawn(h.svc.ClusterProps())
	root.Send(pid, &cluster.ClusterInit{Identity: cluster.NewClusterIdentity(id, plan.ClusterKind)})
	ask := func(msg *planv1.RecordErrorRequest) *actor.Future {
		return root.RequestFuture(pid, msg, 10*time.Second)
	}
	// Activated, so the next Apply is the record's write.
	if r, err := ask(timeoutOn(id, execute, "s")).Result(); err != nil {
		t.Fatalf("first RecordError: %v", err)
	} else if _, ok := r.(*planv1.RecordErrorResponse); !ok {
		t.Fatalf("first RecordError: %v", r)
	}

	entered, open := h.gate.armHold()
	var once sync.Once
	release := func() { once.Do(open) }
	t.Cleanup(release) // a failure below must not leave the writer held
	inFlight := ask(timeoutOn(id, execute, "s"))
	<-entered
	root.Poison(pid)
	// Answered only once the poison was handled: the actor is moving out.
	late, err := ask(timeoutOn(id, execute, "s")).Result()
	if err != nil {
		t.Fatalf("a request after the poison: %v; want an UNAVAILABLE answer", err)
	}
	if e, ok := late.(*commonv1.Error); !ok || e.GetCode() != commonv1.ErrorCode_ERROR_CODE_UNAVAILABLE {
		t.Fatalf("a request after the poison: %v; want UNAVAILABLE", late)
	}
	release()

	r, err := inFlight.Result()
	if err != nil {
		t.Fatalf("the write in flight: %v", err)
	}
	rec, ok := r.(*planv1.RecordErrorResponse)
	if !ok {
		t.Fatalf("the write in flight committed but was answered %v", r)
	}
	if rec.GetRecord().GetSequence() != 1 {
		t.Fatalf("record %v: want sequence 1", rec.GetRecord())
	}
	if err := plan.WaitNoActors(ctxT(t), h.svc); err != nil {
		t.Fatalf("the poisoned actor did not stop: %v", err)
	}
	if n := len(history(t, h.svc, id)); n != 2 {
		t.Fatalf("%d records stored, want 2", n)
	}
}
