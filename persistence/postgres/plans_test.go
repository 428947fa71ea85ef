package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func planRecord(planID string, seq int64) *planv1.ErrorRecord {
	return &planv1.ErrorRecord{RecordId: ids.New(), Namespace: persistence.DefaultNamespace, PlanId: planID, Sequence: seq, Phase: planv1.Phase_PHASE_EXECUTE,
		ErrorType: "TimeoutError", Category: planv1.ErrorCategory_ERROR_CATEGORY_TRANSIENT, AttributesJson: "{}",
		RecordedAt: timestamppb.Now()}
}

// The insert checks the sequence itself; the plan's last sequence is read
// only to word a refusal, and a refused write's stored record ids take
// precedence over its sequence, as they tell a retry what it is.
func TestPlanWriteRefusals(t *testing.T) {
	n := newNode(t, freshDSN(t))
	r0, r1 := planRecord("p", 0), planRecord("p", 1)
	n.ok(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{r0, r1}})

	refused := func(want errs.Code, text string, records ...*planv1.ErrorRecord) error {
		t.Helper()
		err := n.apply(&persistence.PlanWrite{PlanID: "p", Records: records})[0].Err
		if errs.CodeOf(err) != want || !strings.Contains(err.Error(), text) {
			t.Fatalf("write of %d record(s) from sequence %d: %v, want %v naming %q",
				len(records), records[0].Sequence, err, want, text)
		}
		return err
	}
	refused(errs.FailedPreconditionCode, "the next sequence is 2", planRecord("p", 3))
	refused(errs.FailedPreconditionCode, "the next sequence is 2", planRecord("p", -1))
	refused(errs.FailedPreconditionCode, "sequence 1 is taken", planRecord("p", 1), planRecord("p", 2))
	refused(errs.FailedPreconditionCode, "sequence 0 is taken", planRecord("p", 0))
	refused(errs.FailedPreconditionCode, "sequence 4 after 2", planRecord("p", 2), planRecord("p", 4))

	// Nothing inserted, and a stored id among the records: as in the
	// SQLite store, the first record decides. Stored, it is a retry, and
	// every stored record is the answer; new, its sequence is wrong.
	retry := proto.Clone(r0).(*planv1.ErrorRecord)
	retry.Sequence = 5
	refused(errs.FailedPreconditionCode, "the next sequence is 2", planRecord("p", 4), retry)
	retry.Sequence = 4
	err := refused(errs.AlreadyExistsCode, r0.RecordId, retry, planRecord("p", 5))
	var exist *persistence.RecordsExistError
	if !errors.As(err, &exist) || len(exist.Stored) != 1 || !proto.Equal(exist.Stored[0], r0) {
		t.Fatalf("got %v, want a RecordsExistError with record %s as stored", err, r0.RecordId)
	}

	p, err := n.store.Reader().GetPlan(context.Background(), "", "p")
	if err != nil || p.NextSequence != 2 {
		t.Fatalf("after the refused writes: plan %+v, %v; want next sequence 2", p, err)
	}
	n.ok(&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{planRecord("p", 2), planRecord("p", 3)}})
}
