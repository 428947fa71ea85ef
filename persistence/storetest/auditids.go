package storetest

import (
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

// retryOf is what a client's resend of e becomes at the node: the same id
// and content, a later created_at, nothing assigned.
func (h *harness) retryOf(e *auditv1.AuditEntry) *auditv1.AuditEntry {
	r := proto.Clone(e).(*auditv1.AuditEntry)
	r.Position, r.Hash, r.PrevHash = 0, "", ""
	r.CreatedAt = h.ts()
	return r
}

// wantRecorded checks one entry's outcome of a RecordClientAudit.
func (h *harness) wantRecorded(got persistence.RecordedAudit, dup bool, want *auditv1.AuditEntry) {
	h.Helper()
	if got.Err != nil || got.Duplicate != dup {
		h.Fatalf("recorded: duplicate=%v err=%v, want duplicate=%v", got.Duplicate, got.Err, dup)
	}
	if !proto.Equal(got.Entry, want) {
		h.Fatalf("recorded entry:\n got %v\nwant %v", got.Entry, want)
	}
}

// wantStoredOnce checks that the chain verifies and holds each id of es
// exactly once, and nothing else.
func (h *harness) wantStoredOnce(es ...*auditv1.AuditEntry) {
	h.Helper()
	stored := h.verifyChain()
	n := map[string]int{}
	for _, e := range stored {
		n[e.EventId]++
	}
	for _, e := range es {
		if n[e.EventId] != 1 {
			h.Fatalf("event %s stored %d times, want once", e.EventId, n[e.EventId])
		}
	}
	if len(stored) != len(es) {
		h.Fatalf("%d entries stored, want %d", len(stored), len(es))
	}
}

// recordedOf is the per-entry outcome r carries of a RecordClientAudit.
func recordedOf(r persistence.Result) []persistence.RecordedAudit {
	var c *persistence.RecordClientAudit // its type is all ResultOf needs
	return c.ResultOf(r).Recorded
}

var clientAuditCases = []testCase{
	{"a retry in a later transaction is a duplicate answered with the original", func(h *harness) {
		e := h.entry("a")
		res := h.ok(&persistence.RecordClientAudit{Entries: []*auditv1.AuditEntry{e}})
		h.wantRecorded(recordedOf(res)[0], false, e)
		orig := proto.Clone(e).(*auditv1.AuditEntry)
		res = h.ok(&persistence.RecordClientAudit{Entries: []*auditv1.AuditEntry{h.retryOf(e)}})
		h.wantRecorded(recordedOf(res)[0], true, orig)
		h.reacquire() // a restarted writer knows it too: the store decides
		res = h.ok(&persistence.RecordClientAudit{Entries: []*auditv1.AuditEntry{h.retryOf(e)}})
		h.wantRecorded(recordedOf(res)[0], true, orig)
		h.wantStoredOnce(e)
	}},
	{"the same id with other content is ALREADY_EXISTS naming it, and the rest commits", func(h *harness) {
		e := h.entry("a")
		h.ok(&persistence.RecordClientAudit{Entries: []*auditv1.AuditEntry{e}})
		other := h.retryOf(e)
		other.DetailsJson = `{"k":"other"}`
		fresh := h.entry("b")
		res := h.ok(&persistence.RecordClientAudit{Entries: []*auditv1.AuditEntry{other, fresh}})
		wantCode(h.T, recordedOf(res)[0].Err, errs.AlreadyExistsCode)
		if !strings.Contains(recordedOf(res)[0].Err.Error(), e.EventId) {
			h.Fatalf("conflict does not name the id: %v", recordedOf(res)[0].Err)
		}
		if other.Position != 0 || other.Hash != "" {
			h.Fatalf("conflicting entry was assigned: %v", other)
		}
		h.wantRecorded(recordedOf(res)[1], false, fresh)
		h.wantStoredOnce(e, fresh)
	}},
	{"an id sent twice in one transaction is stored once", func(h *harness) {
		// One command (the writer merges concurrent records) and two
		// commands of one batch, after rows waiting for a multi-row insert.
		a, b := h.entry("a"), h.entry("b")
		plain := h.entry("plain")
		res := h.apply(
			&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{plain}},
			&persistence.RecordClientAudit{Entries: []*auditv1.AuditEntry{a, h.retryOf(a)}},
			&persistence.RecordClientAudit{Entries: []*auditv1.AuditEntry{h.retryOf(a), b}},
		)
		for _, r := range res {
			if r.Err != nil {
				h.Fatalf("command failed: %v", r.Err)
			}
		}
		h.wantRecorded(recordedOf(res[1])[0], false, a)
		h.wantRecorded(recordedOf(res[1])[1], true, a)
		h.wantRecorded(recordedOf(res[2])[0], true, a)
		h.wantRecorded(recordedOf(res[2])[1], false, b)
		h.wantStoredOnce(plain, a, b)
	}},
	{"a retry in a batch replayed with savepoints is stored once", func(h *harness) {
		// The append to a missing session fails on its own, which makes
		// the store replay the batch command by command.
		a := h.entry("a")
		res := h.apply(
			&persistence.RecordClientAudit{Entries: []*auditv1.AuditEntry{a}},
			&persistence.AppendMessages{SessionID: ids.New(), Turns: []persistence.Turn{{Messages: []*sessionv1.Message{h.msg("x")}}}},
			&persistence.RecordClientAudit{Entries: []*auditv1.AuditEntry{h.retryOf(a)}},
		)
		if res[0].Err != nil || res[1].Err == nil || res[2].Err != nil {
			h.Fatalf("results: %v, %v, %v", res[0].Err, res[1].Err, res[2].Err)
		}
		h.wantRecorded(recordedOf(res[0])[0], false, a)
		h.wantRecorded(recordedOf(res[2])[0], true, a)
		h.wantStoredOnce(a)
	}},
	{"a client id taken by a node-made entry is ALREADY_EXISTS", func(h *harness) {
		e := h.entry("session_created")
		h.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{e}})
		mine := h.entry("resource_modified", func(x *auditv1.AuditEntry) { x.EventId = e.EventId })
		res := h.ok(&persistence.RecordClientAudit{Entries: []*auditv1.AuditEntry{mine}})
		wantCode(h.T, recordedOf(res)[0].Err, errs.AlreadyExistsCode)
		h.wantStoredOnce(e)
	}},
}
