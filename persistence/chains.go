package persistence

import (
	"context"
	"hash/fnv"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
)

// MaxAuditChains is how many hash chains an audit trail may be partitioned
// into. Each chain has its own head and lock, so writers of different
// chains never wait on each other; 16 is well above the writers one
// PostgreSQL primary runs usefully at once (a member runs one writer, and
// a primary saturates with a handful of members), so each writer finds a
// chain of its own, while a verifier or a prune still walks few heads. It
// is a constant: the chain of a key (AuditChainOf), which the entries that
// are looked up by key go on, must not move.
const MaxAuditChains = 16

// AuditChainOf is the chain of an owner key (a session id, else a plan
// id, else an event id) when the trail has n chains: FNV-1a of the key,
// modulo n. A store puts entries that are looked up by key under their
// chain's lock (records with client event ids) on their key's chain; the
// others may go on any chain (the PostgreSQL store's own-chain writers).
func AuditChainOf(key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// EntryChainKey is the key an entry without an owning command is chained
// by: its session id, else its plan id, else its event id.
func EntryChainKey(e *auditv1.AuditEntry) string {
	switch {
	case e.GetSessionId() != "":
		return e.GetSessionId()
	case e.GetPlanId() != "":
		return e.GetPlanId()
	}
	return e.GetEventId()
}

// NextChainPosition is the position of chain's next entry in a trail of n
// chains: the smallest p > max(last, floor) with p ≡ chain (mod n). Chains
// never share a position, and each chain's positions grow in its commit
// order. floor is the highest head any chain had committed when the
// writer took its chain's lock: a new entry lands past everything already
// committed, which is what lets a change feed find a head below which
// every position is settled (see the PostgreSQL store's AuditBounds).
// With one chain it is last+1: dense, as before partitioning.
func NextChainPosition(last, floor int64, chain, n int) int64 {
	p := max(last, floor) + 1
	if n <= 1 {
		return p
	}
	if r := int((p - int64(chain)) % int64(n)); r != 0 {
		p += int64(n - r)
	}
	return p
}

// ChainHead is one chain's committed state: the anchor its first
// remaining entry links to (the last pruned entry of the chain, "" and 0
// before any prune) and its tail (its last committed entry).
type ChainHead struct {
	Chain          int
	AnchorPosition int64
	AnchorHash     string
	TailPosition   int64
	TailHash       string
}

// ChainReader is a Reader whose audit trail is partitioned into chains
// (the PostgreSQL store). Verify walks each chain with it; a Reader
// without it has one chain, walked with ScanAudit.
type ChainReader interface {
	// AuditChainHeads returns every chain's head, in chain order, read in
	// one snapshot.
	AuditChainHeads(ctx context.Context) ([]ChainHead, error)
	// ScanAuditChain returns chain's entries with afterPosition <
	// Position <= upto, in the chain's order, at most limit.
	ScanAuditChain(ctx context.Context, chain int, afterPosition, upto int64, limit int) ([]*auditv1.AuditEntry, error)
}
