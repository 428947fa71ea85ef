package persistence

import (
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
)

// ChainTail is one transaction's view of the audit hash chains it holds:
// each chain's tail it started from, advanced by every entry it has
// assigned, and those entries. Each store's writer keeps one per attempt;
// the SQL that stores the rows is the store's, the chains' arithmetic is
// here. A store with one chain uses Start and Assign; a partitioned one
// StartChains and AssignTo.
//
// Invariants: each held chain's Position and Hash are its last committed
// entry's advanced by the entries assigned to it since Start, in order;
// each assigned entry carries Position = NextChainPosition of its chain
// (with the floor raised past every entry assigned before it, so a
// transaction's entries are in position order),
// PrevHash = the chain's previous Hash and its own Hash
// (AuditChainHash); Restore(m) unassigns exactly the entries assigned
// after m (zeroing their position and hashes), so an entry of a
// rolled-back command or transaction never looks committed.
type ChainTail struct {
	heads    map[int]chainHead
	started  map[int]chainHead
	n        int
	floor    int64
	assigned []assignedEntry
}

type chainHead struct {
	pos  int64
	hash string
}

type assignedEntry struct {
	e     *auditv1.AuditEntry
	chain int
	prev  chainHead
	floor int64
}

// ChainMark is a ChainTail's state at a savepoint; the zero mark is the
// state before any entry, for a transaction that is abandoned whole.
type ChainMark struct{ n int }

// Start begins a one-chain view at the committed tail.
func (c *ChainTail) Start(pos int64, hash string) {
	c.StartChains(map[int]ChainHead{0: {TailPosition: pos, TailHash: hash}}, 1, pos)
}

// StartChains begins a view of the chains held (by chain number) of a
// trail of n chains; floor is the highest committed tail of any chain
// (NextChainPosition).
func (c *ChainTail) StartChains(held map[int]ChainHead, n int, floor int64) {
	c.heads, c.started = make(map[int]chainHead, len(held)), make(map[int]chainHead, len(held))
	for ch, h := range held {
		c.heads[ch] = chainHead{h.TailPosition, h.TailHash}
		c.started[ch] = c.heads[ch]
	}
	c.n, c.floor, c.assigned = max(n, 1), floor, c.assigned[:0]
}

// Position and Hash are chain 0's tail as far as this transaction has
// assigned (the one chain of an unpartitioned store).
func (c *ChainTail) Position() int64 { return c.heads[0].pos }
func (c *ChainTail) Hash() string    { return c.heads[0].hash }

// Holds reports whether the view holds chain.
func (c *ChainTail) Holds(chain int) bool {
	_, ok := c.heads[chain]
	return ok
}

// Chains is the number of chains of the trail.
func (c *ChainTail) Chains() int { return max(c.n, 1) }

// Assign is AssignTo chain 0.
func (c *ChainTail) Assign(e *auditv1.AuditEntry) { c.AssignTo(0, e) }

// AssignTo gives e the next position of chain and its hashes, and advances
// the chain's tail. The caller holds chain (Holds) and stores e's row; if
// that fails, Restore to a mark taken before unassigns e.
func (c *ChainTail) AssignTo(chain int, e *auditv1.AuditEntry) {
	h := c.heads[chain]
	e.Position = NextChainPosition(h.pos, c.floor, chain, c.n)
	e.PrevHash = h.hash
	e.Hash = AuditChainHash(h.hash, chain, e)
	c.assigned = append(c.assigned, assignedEntry{e: e, chain: chain, prev: h, floor: c.floor})
	c.heads[chain] = chainHead{e.Position, e.Hash}
	// The transaction's next entry, on any chain, lands past this one: a
	// transaction's entries are in position order as it assigned them.
	c.floor = max(c.floor, e.Position)
}

// Advanced returns the chains whose tail moved, with their new tails, in
// chain order.
func (c *ChainTail) Advanced() []ChainHead {
	var out []ChainHead
	for ch := range c.Chains() {
		h, ok := c.heads[ch]
		if ok && h != c.started[ch] {
			out = append(out, ChainHead{Chain: ch, TailPosition: h.pos, TailHash: h.hash})
		}
	}
	return out
}

func (c *ChainTail) Mark() ChainMark { return ChainMark{n: len(c.assigned)} }

// Restore unassigns every entry assigned after m and moves the tails back.
func (c *ChainTail) Restore(m ChainMark) {
	for i := len(c.assigned) - 1; i >= m.n; i-- {
		a := c.assigned[i]
		a.e.Position, a.e.Hash, a.e.PrevHash = 0, "", ""
		c.heads[a.chain], c.floor = a.prev, a.floor
	}
	c.assigned = c.assigned[:m.n]
}

// PrepareEntry checks an entry a command asks to store, as every store
// must before assigning it, and gives it its default details ("{}").
func PrepareEntry(e *auditv1.AuditEntry) error {
	switch {
	case e == nil:
		return errs.InvalidArgument("audit entry is nil")
	case e.GetEventId() == "":
		return errs.InvalidArgument("audit entry has no event_id")
	case e.GetEventType() == "":
		return errs.InvalidArgument("audit entry %s has no event_type", e.GetEventId())
	case e.GetCreatedAt() == nil:
		return errs.InvalidArgument("audit entry %s has no created_at", e.GetEventId())
	case e.GetPosition() != 0:
		return errs.InvalidArgument("audit entry %s is committed already (position %d)", e.GetEventId(), e.GetPosition())
	}
	if _, err := StoredNanos("created_at", e.GetCreatedAt()); err != nil {
		return Of("audit entry", e.GetEventId(), err)
	}
	if e.DetailsJson == "" {
		e.DetailsJson = "{}"
	}
	// A command built without them (an embedded user of the store) gets
	// the embedded principal and the default namespace: every entry from
	// now on is hashed with both (AuditCanonical).
	if e.Principal == "" {
		e.Principal = principal.Embedded
	}
	if e.Namespace == "" {
		e.Namespace = DefaultNamespace
	}
	return nil
}

// DefaultNamespace is the namespace of a session created without one, of
// a plan request that names none, and of audit entries that name no
// session.
const DefaultNamespace = "local"
