package storetest

import (
	"context"
	"math"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
)

// The suite runs on a trail of one chain (SQLite, PostgreSQL by default)
// and on one partitioned into chains (PostgreSQL with audit_chains). With
// one chain positions are dense and every entry links to the one before
// it; with several, positions only rise in each chain's commit order, and
// an entry links to its chain's previous entry. These helpers state each
// check so that it holds exactly in both.

// chains is the trail's chain count.
func (h *harness) chains() int {
	h.Helper()
	heads, err := h.r.(persistence.ChainReader).AuditChainHeads(h.ctx)
	if err != nil {
		h.Fatalf("AuditChainHeads: %v", err)
	}
	return max(len(heads), 1)
}

// verifyChain is VerifyChains on the harness's store.
func (h *harness) verifyChain() []*auditv1.AuditEntry {
	h.Helper()
	return VerifyChains(h.T, h.r)
}

// VerifyChains checks every chain of r's trail from its anchor to its
// head: positions rise, each entry's PrevHash is its chain's previous
// Hash, each Hash is persistence.AuditChainHash, the last entry is the
// head, and the chains hold every entry of the trail; with one chain,
// positions are dense too. It returns every entry in position order.
func VerifyChains(tb testing.TB, r persistence.Reader) []*auditv1.AuditEntry {
	tb.Helper()
	ctx := context.Background()
	cr := r.(persistence.ChainReader)
	heads, err := cr.AuditChainHeads(ctx)
	if err != nil {
		tb.Fatalf("AuditChainHeads: %v", err)
	}
	walked := 0
	for _, hd := range heads {
		var es []*auditv1.AuditEntry
		for after := int64(0); ; {
			page, err := cr.ScanAuditChain(ctx, hd.Chain, after, math.MaxInt64, 1000)
			if err != nil {
				tb.Fatalf("ScanAuditChain(%d): %v", hd.Chain, err)
			}
			es = append(es, page...)
			if len(page) < 1000 {
				break
			}
			after = page[len(page)-1].Position
		}
		prev, lastPos := hd.AnchorHash, int64(0)
		for _, e := range es {
			if e.Position <= lastPos {
				tb.Fatalf("chain %d: entry %s at position %d after %d", hd.Chain, e.EventId, e.Position, lastPos)
			}
			if e.PrevHash != prev {
				tb.Fatalf("chain %d: entry %s (position %d): prev_hash %q, want %q", hd.Chain, e.EventId, e.Position, e.PrevHash, prev)
			}
			if want := persistence.AuditChainHash(prev, hd.Chain, e); e.Hash != want {
				tb.Fatalf("chain %d: entry %s: hash %q, want %q", hd.Chain, e.EventId, e.Hash, want)
			}
			prev, lastPos = e.Hash, e.Position
		}
		if len(es) > 0 && prev != hd.TailHash {
			tb.Fatalf("chain %d ends at %q, its head is %q", hd.Chain, prev, hd.TailHash)
		}
		walked += len(es)
	}
	var all []*auditv1.AuditEntry
	for after := int64(0); ; {
		page, err := r.ScanAudit(ctx, after, 1000)
		if err != nil {
			tb.Fatalf("ScanAudit: %v", err)
		}
		all = append(all, page...)
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].Position
	}
	if walked != len(all) {
		tb.Fatalf("the chains hold %d entries, the trail %d", walked, len(all))
	}
	for i, e := range all {
		if len(heads) == 1 && heads[0].AnchorHash == "" && e.Position != int64(i+1) {
			tb.Fatalf("entry %d of one chain at position %d", i, e.Position)
		}
	}
	return all
}

// chainOf is the chain that stores e; -1 when none does (a prune removed
// it).
func (h *harness) chainOf(e *auditv1.AuditEntry) int {
	h.Helper()
	cr := h.r.(persistence.ChainReader)
	for ch := range h.chains() {
		es, err := cr.ScanAuditChain(h.ctx, ch, e.Position-1, e.Position, 1)
		if err != nil {
			h.Fatalf("ScanAuditChain(%d): %v", ch, err)
		}
		if len(es) == 1 && es[0].EventId == e.EventId {
			return ch
		}
	}
	return -1
}

// hashOK reports whether e's hash chains it onto its PrevHash on its
// chain.
func (h *harness) hashOK(e *auditv1.AuditEntry) bool {
	h.Helper()
	ch := h.chainOf(e)
	if ch < 0 {
		h.Fatalf("entry %s at %d is on no chain", e.EventId, e.Position)
	}
	return e.Hash == persistence.AuditChainHash(e.PrevHash, ch, e)
}

// follows fails the test unless e was committed after prev with nothing
// between them on e's chain: with one chain, at the next position,
// linked to prev; with several, past prev, and linked to prev when they
// share a chain (and prev is still stored).
func (h *harness) follows(prev, e *auditv1.AuditEntry) {
	h.Helper()
	if h.chains() == 1 {
		if e.Position != prev.Position+1 || e.PrevHash != prev.Hash {
			h.Fatalf("entry %s at %d (prev %q), want at %d after %s (%q)", e.EventId, e.Position, e.PrevHash,
				prev.Position+1, prev.EventId, prev.Hash)
		}
		return
	}
	if e.Position <= prev.Position {
		h.Fatalf("entry %s at %d, want past %s at %d", e.EventId, e.Position, prev.EventId, prev.Position)
	}
	if ch := h.chainOf(prev); ch >= 0 && h.chainOf(e) == ch && e.PrevHash != prev.Hash {
		h.Fatalf("entry %s (prev %q) does not follow %s (%q) on their chain", e.EventId, e.PrevHash, prev.EventId, prev.Hash)
	}
}

// inOrder fails the test unless es were committed in this order, each
// following the one before it (follows), the first at position first
// when there is one chain.
func (h *harness) inOrder(first int64, es ...*auditv1.AuditEntry) {
	h.Helper()
	if len(es) == 0 {
		return
	}
	if h.chains() == 1 && es[0].Position != first {
		h.Fatalf("first entry %s at %d, want %d", es[0].EventId, es[0].Position, first)
	}
	for i := 1; i < len(es); i++ {
		h.follows(es[i-1], es[i])
	}
}

// anchorIs fails the test unless chain's anchor (what its first remaining
// entry links to) is e, its last pruned entry. With one chain that is
// AuditAnchor.
func (h *harness) anchorIs(chain int, e *auditv1.AuditEntry) {
	h.Helper()
	heads, err := h.r.(persistence.ChainReader).AuditChainHeads(h.ctx)
	if err != nil || chain >= len(heads) {
		h.Fatalf("AuditChainHeads: %d heads, %v", len(heads), err)
	}
	if heads[chain].AnchorHash != e.Hash {
		h.Fatalf("chain %d's anchor %q, want entry %s's hash %q", chain, heads[chain].AnchorHash, e.EventId, e.Hash)
	}
	if h.chains() == 1 {
		if a, err := h.r.AuditAnchor(h.ctx); err != nil || a != e.Hash {
			h.Fatalf("AuditAnchor %q (%v), want %q", a, err, e.Hash)
		}
	}
}
