package audit

import (
	"context"
	"fmt"
	"math"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

const (
	verifyChunk = 1000
	// verifyAttempts bounds the restarts caused by prunes that move the
	// anchor while a walk runs.
	verifyAttempts = 5
)

// Verify walks every chain of the trail (persistence.ChainReader; a store
// without it has one) in its order from its anchor (the hash of its last
// pruned entry, "" before any prune) up to its head as read at the start,
// and checks every link: an entry's prev_hash must be the previous entry's
// hash, and its hash must be persistence.AuditChainHash(prev_hash, chain,
// entry); and the chain's last entry must be its head. Where the store
// keeps checkpoints (persistence.CheckpointReader: PostgreSQL), it first
// checks them (checkpoint.go): each one's digest and its link to the one
// before, that no chain's head went back from one to the next, that every
// chain the latest one names has a head at or past it, and, during the
// walk, that each chain holds the entry every checkpoint names. It
// reports the first place where any fails, naming the chain and position
// (or the checkpoint). It reads on read-only connections while writes go
// on; entries committed during the walk are checked by the next one.
//
// What it detects: any changed field of a stored entry, an entry removed
// or inserted anywhere in a chain (at its end too: the head names the last
// entry), reordering, an entry moved to another chain, a chain's entries
// left without a head, and, against the latest checkpoint, a chain
// dropped with its head row or cut back with its head rewritten, and an
// altered checkpoint. What it cannot: a chain's entries committed after
// the latest checkpoint, cut off with the head rewritten to match;
// removing the newest checkpoints themselves; and a rewrite of entries,
// heads and checkpoints that recomputes every hash after the change (the
// hashes are not keyed). The last is found only against a checkpoint's
// digest kept outside the database. A store without checkpoints (SQLite:
// one chain, one writer, its head its newest entry) detects the first
// group only, and not the removal of its newest entries.
func (s *Service) Verify(ctx context.Context, _ *auditv1.VerifyRequest) (*auditv1.VerifyResponse, error) {
	for range verifyAttempts {
		resp, pruned, err := s.verifyOnce(ctx)
		if err != nil {
			return nil, err
		}
		if !pruned {
			return resp, nil
		}
	}
	return nil, errs.Unavailable("the audit chain was pruned during each of %d verification walks; retry", verifyAttempts)
}

// verifyOnce walks once. pruned reports that a check failed while an
// anchor moved under the walk: a prune removed entries (or checkpoints)
// ahead of it, so the walk must start over rather than report tampering.
func (s *Service) verifyOnce(ctx context.Context) (resp *auditv1.VerifyResponse, pruned bool, err error) {
	cr, ok := s.reader.(persistence.ChainReader)
	if !ok {
		return s.verifyOne(ctx)
	}
	var heads []persistence.ChainHead
	var latest *persistence.AuditCheckpoint
	if cpr, ok := s.reader.(persistence.CheckpointReader); ok {
		heads, latest, err = cpr.AuditHeadsAndCheckpoint(ctx)
	} else {
		heads, err = cr.AuditChainHeads(ctx)
	}
	if err != nil {
		return nil, false, err
	}
	r, n, err := s.verifyChains(ctx, cr, heads, latest)
	if err != nil {
		return nil, false, err
	}
	if r != nil {
		r.EntriesChecked = n
		if moved, err := s.anchorsMoved(ctx, cr, heads); err != nil || moved {
			return nil, moved, err
		}
		return r, false, nil
	}
	return &auditv1.VerifyResponse{Ok: true, EntriesChecked: n}, false, nil
}

// verifyChains checks the checkpoints up to latest (nil: none), the heads
// against it, and walks every chain; it returns a response only for a
// broken trail, and how many entries it checked.
func (s *Service) verifyChains(ctx context.Context, cr persistence.ChainReader, heads []persistence.ChainHead,
	latest *persistence.AuditCheckpoint) (*auditv1.VerifyResponse, int64, error) {
	pins, r, err := s.checkCheckpoints(ctx, latest)
	if err != nil || r != nil {
		return r, 0, err
	}
	if r := headsBehind(heads, latest); r != nil {
		return r, 0, nil
	}
	var n int64
	for i, h := range heads {
		if h.Chain != i {
			return &auditv1.VerifyResponse{
				Reason: fmt.Sprintf("chain %d has no head: the chains' heads are %d, want 0 to %d", i, h.Chain, len(heads)-1)}, n, nil
		}
		r, checked, err := s.walkChain(ctx, cr, h, pins[h.Chain])
		n += checked
		if err != nil || r != nil {
			return r, n, err
		}
	}
	// Entries of a chain past the last head: its head row was dropped.
	for ch := len(heads); ch < persistence.MaxAuditChains; ch++ {
		es, err := cr.ScanAuditChain(ctx, ch, 0, math.MaxInt64, 1)
		if err != nil {
			return nil, n, err
		}
		if len(es) > 0 {
			return &auditv1.VerifyResponse{FirstBrokenEventId: es[0].GetEventId(),
				Reason: fmt.Sprintf("chain %d has entries but no head (%d chains have heads)", ch, len(heads))}, n, nil
		}
	}
	return nil, n, nil
}

// walkChain checks one chain from its anchor up to its head's tail: every
// link, each entry a checkpoint names (pins, ascending), and that the
// last entry is the head's tail, so that deleting the chain's newest
// entries, or all of them, is found too. It returns a response only for a
// broken chain.
func (s *Service) walkChain(ctx context.Context, cr persistence.ChainReader, h persistence.ChainHead, pins []pin) (*auditv1.VerifyResponse, int64, error) {
	pins, r := pinsAtAnchor(h, pins)
	if r != nil {
		return r, 0, nil
	}
	prev := h.AnchorHash
	var pos, n int64
	last := ""
	for {
		es, err := cr.ScanAuditChain(ctx, h.Chain, pos, h.TailPosition, verifyChunk)
		if err != nil {
			return nil, n, err
		}
		for _, e := range es {
			if reason := linkBroken(prev, h.Chain, e); reason != "" {
				return &auditv1.VerifyResponse{FirstBrokenEventId: e.GetEventId(),
					Reason: fmt.Sprintf("chain %d at position %d: %s", h.Chain, e.GetPosition(), reason)}, n, nil
			}
			if pins, r = pinAt(h.Chain, pins, e); r != nil {
				return r, n, nil
			}
			prev, pos, last = e.GetHash(), e.GetPosition(), e.GetEventId()
			n++
		}
		if len(es) < verifyChunk {
			break
		}
	}
	if prev != h.TailHash {
		return &auditv1.VerifyResponse{FirstBrokenEventId: last,
			Reason: fmt.Sprintf("chain %d ends at hash %s (position %d), but its head is %s (position %d): entries at its end are missing",
				h.Chain, short(prev), pos, short(h.TailHash), h.TailPosition)}, n, nil
	}
	if len(pins) > 0 {
		return pinMissing(h.Chain, pins[0], last), n, nil
	}
	return nil, n, nil
}

// linkBroken says why e does not extend the chain whose last hash is prev
// ("" when it does).
func linkBroken(prev string, chain int, e *auditv1.AuditEntry) string {
	switch {
	case e.GetPrevHash() != prev:
		return "prev_hash " + short(e.GetPrevHash()) + " does not match the previous link " + short(prev)
	case persistence.AuditChainHash(prev, chain, e) != e.GetHash():
		return "hash does not match the entry's content"
	}
	return ""
}

// anchorsMoved reports whether a prune moved any chain's anchor since
// heads were read.
func (s *Service) anchorsMoved(ctx context.Context, cr persistence.ChainReader, heads []persistence.ChainHead) (bool, error) {
	now, err := cr.AuditChainHeads(ctx)
	if err != nil {
		return false, err
	}
	if len(now) != len(heads) {
		return false, nil
	}
	for i := range now {
		if now[i].AnchorHash != heads[i].AnchorHash {
			return true, nil
		}
	}
	return false, nil
}

// verifyOne walks a reader's one chain in commit order.
func (s *Service) verifyOne(ctx context.Context) (resp *auditv1.VerifyResponse, pruned bool, err error) {
	anchor, err := s.reader.AuditAnchor(ctx)
	if err != nil {
		return nil, false, err
	}
	prev := anchor
	var pos, n int64
	for {
		es, err := s.reader.ScanAudit(ctx, pos, verifyChunk)
		if err != nil {
			return nil, false, err
		}
		for _, e := range es {
			if reason := linkBroken(prev, 0, e); reason != "" {
				now, err := s.reader.AuditAnchor(ctx)
				if err != nil {
					return nil, false, err
				}
				if now != anchor {
					return nil, true, nil
				}
				return &auditv1.VerifyResponse{EntriesChecked: n, FirstBrokenEventId: e.GetEventId(), Reason: reason}, false, nil
			}
			prev, pos = e.GetHash(), e.GetPosition()
			n++
		}
		if len(es) < verifyChunk {
			return &auditv1.VerifyResponse{Ok: true, EntriesChecked: n}, false, nil
		}
	}
}

func short(h string) string {
	if h == "" {
		return `""`
	}
	if len(h) > 12 {
		return h[:12] + "..."
	}
	return h
}
