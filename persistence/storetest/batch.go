package storetest

import (
	"context"
	"errors"
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

// mixedBatch is one of every command, each with an audit entry, and the
// entries in batch order.
func (h *harness) mixedBatch(s *sessionv1.Session) ([]persistence.Command, []*auditv1.AuditEntry) {
	es := make([]*auditv1.AuditEntry, 6)
	for i := range es {
		es[i] = h.entry("e")
	}
	big := strings.Repeat("x", 64<<10)
	return []persistence.Command{
		&persistence.CreateSession{Session: h.session(), Messages: []*sessionv1.Message{h.msg(big)}, Audit: es[0:1]},
		&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{{Messages: []*sessionv1.Message{h.msg(big)}, Audit: es[1:2]}}},
		&persistence.UpdateSession{SessionID: s.SessionId, TokenDelta: &sessionv1.TokenUsage{InputTokens: 1}, Audit: es[2:3]},
		&persistence.PlanWrite{PlanID: "p", Records: []*planv1.ErrorRecord{h.record("p", 0, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)}, Audit: es[3:4]},
		&persistence.RecordAudit{Entries: es[4:5]},
		&persistence.DeleteSession{SessionID: s.SessionId, Audit: es[5:6]},
	}, es
}

// assertUntouched checks that nothing of a mixedBatch on s is stored.
func (h *harness) assertUntouched(s *sessionv1.Session, es []*auditv1.AuditEntry) {
	h.Helper()
	for _, e := range es {
		if e.Position != 0 || e.Hash != "" || e.PrevHash != "" {
			h.Fatalf("entry of a failed transaction kept its assignment: %v", e)
		}
	}
	got := h.get(s.SessionId)
	if got.MessageCount != 0 || got.TokenUsage.GetInputTokens() != 0 {
		h.Fatalf("session changed by a failed transaction: %v", got)
	}
	if _, err := h.r.GetPlan(h.ctx, "", "p"); errs.CodeOf(err) != errs.NotFoundCode {
		h.Fatalf("plan of a failed transaction: %v", err)
	}
	if all, _ := h.r.ListSessions(h.ctx, persistence.SessionFilter{}); len(all) != 1 {
		h.Fatalf("%d sessions after a failed transaction, want 1", len(all))
	}
}

// transactionFailure makes writes fail with inject, checks that a batch
// fails whole with code, then heals and checks that the same batch commits
// and chains on the entries before the failure.
func transactionFailure(h *harness, code errs.Code, inject, heal func() error) {
	base := h.entry("before")
	h.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{base}})
	s := h.create()
	if err := inject(); err != nil {
		h.Fatalf("inject fault: %v", err)
	}
	batch, es := h.mixedBatch(s)
	res, err := h.w.Apply(h.ctx, batch)
	if err == nil {
		heal()
		h.Fatalf("Apply under a fault succeeded: %+v", res)
	}
	wantCode(h.T, err, code)
	if res != nil {
		h.Fatalf("failed Apply returned results %v", res)
	}
	if err := heal(); err != nil {
		h.Fatalf("heal fault: %v", err)
	}
	h.assertUntouched(s, es)
	for i, r := range h.apply(batch...) {
		if r.Err != nil {
			h.Fatalf("command %d after healing: %v", i, r.Err)
		}
	}
	// The chain continues from base as if the failed transaction had
	// never run.
	h.follows(base, es[0])
	h.verifyChain()
}

var batchCases = []testCase{
	{"a failing command rolls back alone", func(h *harness) {
		s := h.create()
		good1, bad, good2 := h.entry("a"), h.entry("b"), h.entry("c")
		missing := ids.New()
		res := h.apply(
			&persistence.AppendMessages{SessionID: s.SessionId, Turns: []persistence.Turn{{Messages: h.msgs(2), Audit: []*auditv1.AuditEntry{good1}}}},
			// Writes rows, then fails: its plan row and records must go too.
			&persistence.PlanWrite{PlanID: "p", MaxRetries: int32p(5), Records: []*planv1.ErrorRecord{
				h.record("p", 0, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL),
				h.record("p", 7, planv1.Phase_PHASE_ACTION, planv1.ErrorCategory_ERROR_CATEGORY_TOOL)},
				Audit: []*auditv1.AuditEntry{bad}},
			&persistence.UpdateSession{SessionID: missing},
			&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: 2, Turns: []persistence.Turn{{Messages: h.msgs(1), Audit: []*auditv1.AuditEntry{good2}}}},
		)
		if res[0].Err != nil || res[3].Err != nil {
			h.Fatalf("good commands failed: %v, %v", res[0].Err, res[3].Err)
		}
		wantCode(h.T, res[1].Err, errs.FailedPreconditionCode)
		wantCode(h.T, res[2].Err, errs.NotFoundCode)
		if _, err := h.r.GetPlan(h.ctx, "", "p"); errs.CodeOf(err) != errs.NotFoundCode {
			h.Fatalf("rolled-back plan write left a plan: %v", err)
		}
		if bad.Position != 0 || bad.Hash != "" {
			h.Fatalf("rolled-back entry kept position %d", bad.Position)
		}
		h.inOrder(1, good1, good2)
		if n := h.get(s.SessionId).MessageCount; n != 3 {
			h.Fatalf("message_count %d, want 3", n)
		}
		h.verifyChain()
	}},
	{"a duplicate entry among many commands fails alone", func(h *harness) {
		stored := h.entry("a")
		h.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{stored}})
		dup := proto.Clone(stored).(*auditv1.AuditEntry)
		dup.Position, dup.Hash, dup.PrevHash = 0, "", ""
		var batch []persistence.Command
		var good []*auditv1.AuditEntry
		for i := 0; i < 150; i++ {
			if i == 97 {
				batch = append(batch, &persistence.RecordAudit{Entries: []*auditv1.AuditEntry{h.entry("x"), dup}})
				continue
			}
			e := h.entry("a")
			good = append(good, e)
			batch = append(batch, &persistence.RecordAudit{Entries: []*auditv1.AuditEntry{e}})
		}
		for i, r := range h.apply(batch...) {
			if (r.Err != nil) != (i == 97) {
				h.Fatalf("command %d: %v", i, r.Err)
			}
		}
		wantCode(h.T, h.apply(batch[97])[0].Err, errs.AlreadyExistsCode)
		h.inOrder(2, good...)
		if n := len(h.verifyChain()); n != 1+len(good) {
			h.Fatalf("%d entries stored, want %d", n, 1+len(good))
		}
	}},
	{"empty batch", func(h *harness) {
		if res := h.apply(); len(res) != 0 {
			h.Fatalf("results %v", res)
		}
	}},
	{"nil command is INVALID_ARGUMENT", func(h *harness) {
		h.fails(nil, errs.InvalidArgumentCode)
	}},
	{"one writer at a time", func(h *harness) {
		if _, err := h.store.Writer(); !errors.Is(err, persistence.ErrWriterTaken) || errs.CodeOf(err) != errs.FailedPreconditionCode {
			h.Fatalf("second Writer: %v, want ErrWriterTaken", err)
		}
		h.reacquire()
		h.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{h.entry("a")}})
	}},
	{"released writer refuses Apply", func(h *harness) {
		old := h.w
		h.reacquire()
		old.Release() // a stale Release must not free the new holder's writer
		if _, err := old.Apply(h.ctx, []persistence.Command{&persistence.RecordAudit{}}); err == nil {
			h.Fatalf("Apply on a released writer succeeded")
		}
		if _, err := h.store.Writer(); errs.CodeOf(err) != errs.FailedPreconditionCode {
			h.Fatalf("Writer while held: %v", err)
		}
	}},
	{"cancelled context stores nothing", func(h *harness) {
		s := h.create()
		ctx, cancel := context.WithCancel(h.ctx)
		cancel()
		batch, es := h.mixedBatch(s)
		res, err := h.w.Apply(ctx, batch)
		wantCode(h.T, err, errs.UnavailableCode)
		if res != nil {
			h.Fatalf("results %v", res)
		}
		h.assertUntouched(s, es)
		// The writer is still usable, and nothing was lost (a memory
		// database lives on its writer connection).
		for i, r := range h.apply(batch...) {
			if r.Err != nil {
				h.Fatalf("command %d after the cancelled Apply: %v", i, r.Err)
			}
		}
		h.verifyChain()
	}},
	{"read-only database fails the whole batch", func(h *harness) {
		ro, ok := h.store.(ReadOnlySwitch)
		if !ok {
			h.Skip("store cannot simulate a read-only file (implement storetest.ReadOnlySwitch)")
		}
		transactionFailure(h, errs.UnavailableCode, func() error { return ro.SetReadOnly(true) },
			func() error { return ro.SetReadOnly(false) })
	}},
	{"full database fails the whole batch", func(h *harness) {
		pl, ok := h.store.(PageLimiter)
		if !ok {
			h.Skip("store cannot simulate a full disk (implement storetest.PageLimiter)")
		}
		transactionFailure(h, errs.ResourceExhaustedCode, func() error {
			n, err := pl.PageCount()
			if err != nil {
				return err
			}
			return pl.SetMaxPageCount(n)
		}, func() error { return pl.SetMaxPageCount(1 << 30) })
	}},
}
