package checker

import (
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
)

// checkAudit: every acknowledged synchronous entry was durable when
// answered and is stored as answered (position and hash included); no
// event id and no request's content is stored twice, and every stored
// entry of the load's type was sent; the chain verifies.
func checkAudit(l *Ledger, o *Observed, r *Report) {
	checkAuditLog(l, o, r)
	seen := make(map[string]bool)
	for _, a := range l.audit {
		r.AuditAcked++
		if a.Resp.GetDuplicate() {
			r.AuditRetriedStored++
		}
		want := a.Resp.GetEntry()
		id := want.GetEventId()
		if seen[id] {
			r.problem(&r.BadAcks, "audit: event id %s acknowledged twice", id)
		}
		seen[id] = true
		if named := a.Req.GetEventId(); named != "" && named != id {
			r.problem(&r.BadAcks, "audit: request for event %s acknowledged with event %s", named, id)
		}
		if a.Req.GetSync() && !a.Resp.GetDurable() {
			r.problem(&r.BadAcks, "audit: synchronous entry %s answered before it was durable", id)
		}
		if want.GetEventType() != a.Req.GetEventType() || want.GetActorName() != a.Req.GetActorName() {
			r.problem(&r.BadAcks, "audit: entry %s answered with type %q actor %q", id, want.GetEventType(), want.GetActorName())
		}
		got := o.Audit[id]
		switch {
		case got == nil:
			r.problem(&r.Lost, "audit: acknowledged entry %s (position %d) not found", id, want.GetPosition())
		case !sameAuditEntry(got, want):
			r.problem(&r.Changed, "audit: entry %s stored as position %d hash %.12s, acknowledged as position %d hash %.12s",
				id, got.GetPosition(), got.GetHash(), want.GetPosition(), want.GetHash())
		}
	}
	c := o.Chain
	if c == nil {
		r.problem(&r.ChainBroken, "audit: chain not verified")
		return
	}
	r.AuditChecked = c.GetEntriesChecked()
	if !c.GetOk() {
		r.problem(&r.ChainBroken, "audit: chain broken at %s: %s", c.GetFirstBrokenEventId(), c.GetReason())
	} else if c.GetEntriesChecked() < int64(len(l.audit)) {
		r.problem(&r.ChainBroken, "audit: chain verified %d entries, fewer than the %d acknowledged", c.GetEntriesChecked(), len(l.audit))
	}
}

// checkAuditLog counts the entries of the load's event type stored twice —
// under one event id, or one request's content (type, actor, details: the
// load makes each request's details unique) under two ids, which is what a
// retry of a record without a client id stores — and those of ids never
// sent.
func checkAuditLog(l *Ledger, o *Observed, r *Report) {
	byID := make(map[string]bool, len(o.AuditLog))
	byContent := make(map[string]string, len(o.AuditLog))
	for _, e := range o.AuditLog {
		id := e.GetEventId()
		content := e.GetEventType() + "\x00" + e.GetActorName() + "\x00" + e.GetDetailsJson()
		switch first, again := byContent[content]; {
		case byID[id]:
			r.problem(&r.DupAudit, "audit: event id %s stored twice", id)
		case again:
			r.problem(&r.DupAudit, "audit: entry %s stores the request of entry %s again", id, first)
		default:
			byContent[content] = id
		}
		byID[id] = true
		if _, sent := l.auditSent[id]; !sent {
			r.problem(&r.Phantom, "audit: entry %s (position %d) of an event id never sent", id, e.GetPosition())
		}
	}
}

// sameAuditEntry compares what an entry's hash covers and the chain
// fields. created_at is left to the hash: a store may keep it at a coarser
// precision than the answer carried.
func sameAuditEntry(a, b *auditv1.AuditEntry) bool {
	return a.GetEventId() == b.GetEventId() && a.GetEventType() == b.GetEventType() &&
		a.GetPlanId() == b.GetPlanId() && a.GetSessionId() == b.GetSessionId() &&
		a.GetProjectName() == b.GetProjectName() && a.GetActorName() == b.GetActorName() &&
		a.GetUserIdentity() == b.GetUserIdentity() && a.GetDetailsJson() == b.GetDetailsJson() &&
		a.GetPosition() == b.GetPosition() && a.GetHash() == b.GetHash() && a.GetPrevHash() == b.GetPrevHash()
}
