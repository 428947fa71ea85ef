package audit

import (
	"context"
	"fmt"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
)

// pin is a chain's head as a checkpoint named it: the chain must hold an
// entry at pos with hash (unless pruned past it).
type pin struct {
	seq  int64
	pos  int64
	hash string
}

// checkCheckpoints walks the checkpoints up to latest in seq order: each
// one's digest, its link to the one before, and that no chain's head went
// back and no chain went missing from one to the next. It returns each
// chain's pins, ascending and without repeats, or a response naming the
// first broken checkpoint. The first checkpoint left after a prune links
// to one that is gone; its link is taken as given.
func (s *Service) checkCheckpoints(ctx context.Context, latest *persistence.AuditCheckpoint) (map[int][]pin, *auditv1.VerifyResponse, error) {
	pins := map[int][]pin{}
	if latest == nil {
		return pins, nil, nil
	}
	cpr := s.reader.(persistence.CheckpointReader)
	var prev *persistence.AuditCheckpoint
	for after := int64(0); ; {
		cps, err := cpr.AuditCheckpoints(ctx, after, latest.Seq, verifyChunk)
		if err != nil {
			return nil, nil, err
		}
		for _, cp := range cps {
			if reason := checkpointBroken(prev, cp); reason != "" {
				return nil, &auditv1.VerifyResponse{Reason: reason}, nil
			}
			for _, h := range cp.Heads {
				ps := pins[h.Chain]
				if h.TailHash != "" && (len(ps) == 0 || ps[len(ps)-1].pos != h.TailPosition) {
					pins[h.Chain] = append(ps, pin{seq: cp.Seq, pos: h.TailPosition, hash: h.TailHash})
				}
			}
			prev, after = cp, cp.Seq
		}
		if len(cps) < verifyChunk {
			break
		}
	}
	if prev == nil || prev.Seq != latest.Seq {
		return nil, &auditv1.VerifyResponse{Reason: fmt.Sprintf("checkpoint %d, the latest, is missing from the checkpoints", latest.Seq)}, nil
	}
	return pins, nil, nil
}

// checkpointBroken says why cp does not follow prev (nil: cp is the
// first left); "" when it does.
func checkpointBroken(prev, cp *persistence.AuditCheckpoint) string {
	if persistence.CheckpointDigest(cp.Seq, cp.Heads, cp.PrevDigest) != cp.Digest {
		return fmt.Sprintf("checkpoint %d: its digest does not match the heads and the link it holds: the checkpoint was altered", cp.Seq)
	}
	switch {
	case prev == nil && cp.Seq == 1 && cp.PrevDigest != "":
		return "checkpoint 1 links to a checkpoint before it"
	case prev == nil:
		return ""
	case cp.Seq != prev.Seq+1:
		return fmt.Sprintf("checkpoints %d to %d are missing (after checkpoint %d comes %d)", prev.Seq+1, cp.Seq-1, prev.Seq, cp.Seq)
	case cp.PrevDigest != prev.Digest:
		return fmt.Sprintf("checkpoint %d does not link to checkpoint %d's digest", cp.Seq, prev.Seq)
	case len(cp.Heads) < len(prev.Heads):
		return fmt.Sprintf("checkpoint %d names %d chains, checkpoint %d named %d: chain %d was dropped",
			cp.Seq, len(cp.Heads), prev.Seq, len(prev.Heads), len(cp.Heads))
	}
	for c, h := range prev.Heads {
		if cp.Heads[c].TailPosition < h.TailPosition {
			return fmt.Sprintf("chain %d: checkpoint %d names its head at position %d, behind checkpoint %d's position %d",
				c, cp.Seq, cp.Heads[c].TailPosition, prev.Seq, h.TailPosition)
		}
	}
	return ""
}

// headsBehind checks the chains' heads against the latest checkpoint (read
// in one snapshot with them): every chain it names has a head, at or
// past the checkpoint's.
func headsBehind(heads []persistence.ChainHead, latest *persistence.AuditCheckpoint) *auditv1.VerifyResponse {
	if latest == nil {
		return nil
	}
	byChain := make(map[int]persistence.ChainHead, len(heads))
	for _, h := range heads {
		byChain[h.Chain] = h
	}
	for c, want := range latest.Heads {
		h, ok := byChain[c]
		switch {
		case !ok:
			return &auditv1.VerifyResponse{Reason: fmt.Sprintf("chain %d has no head, but checkpoint %d names its head at position %d: the chain was dropped",
				c, latest.Seq, want.TailPosition)}
		case h.TailPosition < want.TailPosition:
			return &auditv1.VerifyResponse{Reason: fmt.Sprintf("chain %d: its head is at position %d, behind checkpoint %d's position %d: entries at its end were removed",
				c, h.TailPosition, latest.Seq, want.TailPosition)}
		}
	}
	return nil
}

// pinsAtAnchor drops the pins a prune removed the entries of: those below
// the chain's anchor; one at the anchor must be the anchor.
func pinsAtAnchor(h persistence.ChainHead, pins []pin) ([]pin, *auditv1.VerifyResponse) {
	for len(pins) > 0 && pins[0].pos <= h.AnchorPosition {
		if pins[0].pos == h.AnchorPosition && pins[0].hash != h.AnchorHash {
			return nil, &auditv1.VerifyResponse{Reason: fmt.Sprintf("chain %d: its anchor at position %d is %s, but checkpoint %d names %s there",
				h.Chain, h.AnchorPosition, short(h.AnchorHash), pins[0].seq, short(pins[0].hash))}
		}
		pins = pins[1:]
	}
	return pins, nil
}

// pinAt checks entry e of chain against the pins up to its position and
// returns the pins past it.
func pinAt(chain int, pins []pin, e *auditv1.AuditEntry) ([]pin, *auditv1.VerifyResponse) {
	for len(pins) > 0 && pins[0].pos <= e.GetPosition() {
		if pins[0].pos < e.GetPosition() {
			return nil, pinMissing(chain, pins[0], e.GetEventId())
		}
		if pins[0].hash != e.GetHash() {
			return nil, &auditv1.VerifyResponse{FirstBrokenEventId: e.GetEventId(),
				Reason: fmt.Sprintf("chain %d at position %d: hash %s, but checkpoint %d names %s there",
					chain, e.GetPosition(), short(e.GetHash()), pins[0].seq, short(pins[0].hash))}
		}
		pins = pins[1:]
	}
	return pins, nil
}

func pinMissing(chain int, p pin, near string) *auditv1.VerifyResponse {
	return &auditv1.VerifyResponse{FirstBrokenEventId: near,
		Reason: fmt.Sprintf("chain %d has no entry at position %d, which checkpoint %d names as its head", chain, p.pos, p.seq)}
}
