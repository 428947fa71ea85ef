package audit

import (
	"context"

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

// Verify walks the chain in commit order from the anchor (the hash of the
// last pruned entry, "" before any prune) and checks every link: an
// entry's prev_hash must be the previous entry's hash, and its hash must be
// persistence.AuditHash(prev_hash, entry). It reports the first entry
// where either fails. It reads on read-only connections while writes go
// on; entries committed during the walk are checked when the walk reaches
// them.
//
// What it detects: any changed field of a stored entry, an entry removed
// or inserted anywhere but at the very end, reordering. What it cannot:
// removing the newest entries (nothing after them links to them).
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

// verifyOnce walks once. pruned reports that a link looked broken while
// the anchor moved under the walk: a prune removed entries ahead of it,
// so the walk must start over rather than report tampering.
func (s *Service) verifyOnce(ctx context.Context) (resp *auditv1.VerifyResponse, pruned bool, err error) {
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
			reason := ""
			switch {
			case e.GetPrevHash() != prev:
				reason = "prev_hash " + short(e.GetPrevHash()) + " does not match the previous link " + short(prev)
			case persistence.AuditHash(prev, e) != e.GetHash():
				reason = "hash does not match the entry's content"
			}
			if reason != "" {
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
