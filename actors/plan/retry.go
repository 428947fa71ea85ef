package plan

import (
	"github.com/agentstate/agentstate/actors/lifecycle"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

// Idempotent RecordError. A request that names its record (record_id, a
// client-made ULID) may be retried: a retry is answered with the stored
// original (duplicate = true) and changes nothing, so it neither stores a
// second record nor bumps a retry count or a sequence. The actor knows the
// record ids of its own activation (unanswered ones in byRecord, recently
// committed ones in recent); the store knows all of them, and is asked
// inside the writer's transaction: a PlanWrite carrying a stored record id
// fails whole with a *persistence.RecordsExistError listing the stored
// records (recordsExist, below). That is what makes a retry safe after
// passivation, after a move to another member and after memory forgot it.
//
// A retry is the same request: a record_id names one error, so a request
// reusing a known id with other content (sameError) is ALREADY_EXISTS
// naming the id and changes nothing, rather than being answered with the
// original while its own content is dropped. The content is compared only
// once the id is found known, so a first attempt costs nothing more.

// Bounds on what an actor remembers of its committed records with client
// ids; older ones are resolved by the store, at the cost of a refused write.
const (
	recentRecords      = 256
	recentRecordsBytes = 1 << 20
)

// recent holds the latest committed records that had client ids, oldest
// first, at most recentRecords of them and about recentRecordsBytes.
//
// Invariant: byID holds exactly the records of order; bytes is their size.
type recent struct {
	byID  map[string]*planv1.ErrorRecord
	order []string
	bytes int
}

func recordSize(r *planv1.ErrorRecord) int {
	return 256 + len(r.GetMessage()) + len(r.GetStackSummary()) + len(r.GetAttributesJson())
}

// add remembers a copy of r: the original goes to its caller, who may
// keep and change it.
func (c *recent) add(r *planv1.ErrorRecord) {
	if c.byID == nil {
		c.byID = make(map[string]*planv1.ErrorRecord)
	}
	if _, ok := c.byID[r.GetRecordId()]; ok {
		return
	}
	c.byID[r.GetRecordId()] = proto.Clone(r).(*planv1.ErrorRecord)
	c.order = append(c.order, r.GetRecordId())
	c.bytes += recordSize(r)
	for len(c.order) > 1 && (len(c.order) > recentRecords || c.bytes > recentRecordsBytes) {
		old := c.order[0]
		c.order = c.order[1:]
		c.bytes -= recordSize(c.byID[old])
		delete(c.byID, old)
	}
}

// get returns a copy of the remembered record id, or nil.
func (c *recent) get(id string) *planv1.ErrorRecord {
	if r, ok := c.byID[id]; ok {
		return proto.Clone(r).(*planv1.ErrorRecord)
	}
	return nil
}

// retried answers op if it retries a record this activation knows: one
// committed (at once, with the record) or one still unanswered (op then
// follows it and is answered with its outcome). It reports whether op was
// taken care of; if not, op is the first of its record id and is noted in
// byRecord.
func (o *owner) retried(n *op) bool {
	if n.kind != opRecordError || n.recordErr.GetRecordId() == "" {
		return false
	}
	id := n.recordID
	if r := o.recent.get(id); r != nil {
		if !sameError(n.recordErr, r) {
			o.ans.Reply(n.req, nil, recordIDTaken(id))
			return true
		}
		o.ans.Reply(n.req, &planv1.RecordErrorResponse{Record: r, Duplicate: true}, nil)
		return true
	}
	if first, ok := o.byRecord[id]; ok {
		if !sameRequest(n.recordErr, first.recordErr) {
			o.ans.Reply(n.req, nil, recordIDTaken(id))
			return true
		}
		first.followers = append(first.followers, n.req)
		return true
	}
	if o.byRecord == nil {
		o.byRecord = make(map[string]*op)
	}
	o.byRecord[id] = n
	return false
}

// answer replies to op's caller and to every retry that follows it; a
// follower learns it was a retry from duplicate = true.
func (o *owner) answer(op *op, resp proto.Message, err error) {
	o.ans.Reply(op.req, resp, err)
	if op.kind != opRecordError {
		return
	}
	if o.byRecord[op.recordID] == op {
		delete(o.byRecord, op.recordID)
	}
	if err == nil && op.recordErr.GetRecordId() != "" {
		rec := resp.(*planv1.RecordErrorResponse).GetRecord()
		o.recent.add(rec)
		for _, f := range op.followers {
			o.ans.Reply(f, &planv1.RecordErrorResponse{Record: proto.Clone(rec).(*planv1.ErrorRecord), Duplicate: true}, nil)
		}
	} else {
		for _, f := range op.followers {
			o.ans.Reply(f, resp, err)
		}
	}
	op.followers = nil
}

// recordsExist ends a write the store refused because record ids of it
// are stored already; nothing of it was stored. Each op whose id is stored
// for this plan is a retry of a record committed earlier (by an earlier
// activation, or one recent forgot) and is answered with it; one whose id
// is stored for another plan fails with ALREADY_EXISTS. The other ops go
// back to the head of the queue (Outcome.Requeue) and are recomputed from
// committed, which already includes every stored record of the plan (it
// was loaded after this activation's epoch committed), so the next write
// carries none of the stored ids.
func (o *owner) recordsExist(carried []*lifecycle.Request, e *persistence.RecordsExistError) lifecycle.Outcome {
	stored := make(map[string]*planv1.ErrorRecord, len(e.Stored))
	for _, r := range e.Stored {
		stored[r.GetRecordId()] = r
	}
	var resend []*lifecycle.Request
	stale := false
	for _, req := range carried {
		op := req.Value.(*op)
		r, ok := stored[op.recordID]
		switch {
		case !ok || op.kind != opRecordError:
			resend = append(resend, req)
		case r.GetPlanId() == o.planID && r.GetNamespace() == o.ns:
			// A stored record of this plan that committed does not
			// count means memory and store disagree: reload.
			stale = stale || r.GetSequence() >= o.committed.nextSeq
			if !sameError(op.recordErr, r) {
				o.answer(op, nil, recordIDTaken(op.recordID))
				continue
			}
			o.answer(op, &planv1.RecordErrorResponse{Record: r, Duplicate: true}, nil)
		default:
			// Which plan, or namespace, is not said: it may be one the
			// caller cannot read.
			o.answer(op, nil, errs.AlreadyExists("record_id %s is recorded for another plan; a record_id names one record of one plan", op.recordID))
		}
	}
	if len(resend) == len(carried) {
		// The store named no record of the write: resending would fail again.
		o.fail(opsOf(carried), errs.Internal("plan %s: the store refused a write for stored record ids it did not name: %v", o.key, e))
		return lifecycle.Outcome{Rebase: true}
	}
	return lifecycle.Outcome{Requeue: resend, Stale: stale, Rebase: true}
}

// sameError reports whether req (validated and normalized) asks for the
// error that r records: every field the caller supplies is equal. What the
// plan derived (sequence, retry count, advice, time) is not the caller's.
func sameError(req *planv1.RecordErrorRequest, r *planv1.ErrorRecord) bool {
	return req.GetPhase() == r.GetPhase() && req.GetStepId() == r.GetStepId() &&
		req.GetErrorType() == r.GetErrorType() && req.GetMessage() == r.GetMessage() &&
		req.GetTool() == r.GetTool() && req.GetActorName() == r.GetActorName() &&
		req.GetStackSummary() == r.GetStackSummary() &&
		orEmptyObject(req.GetAttributesJson()) == orEmptyObject(r.GetAttributesJson())
}

// sameRequest is sameError for two requests (validated and normalized).
func sameRequest(a, b *planv1.RecordErrorRequest) bool {
	return sameError(a, &planv1.ErrorRecord{Phase: b.GetPhase(), StepId: b.GetStepId(), ErrorType: b.GetErrorType(),
		Message: b.GetMessage(), Tool: b.GetTool(), ActorName: b.GetActorName(), StackSummary: b.GetStackSummary(),
		AttributesJson: b.GetAttributesJson()})
}

func recordIDTaken(id string) error {
	return errs.AlreadyExists("record_id %s is recorded with other content; a retry must repeat its request exactly", id)
}

func orEmptyObject(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}
