package persistence

import (
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
)

// ChainTail is one transaction's view of the audit hash chain: the tail it
// started from, advanced by every entry it has assigned, and those entries.
// Each store's writer keeps one per attempt; the SQL that stores the rows
// is the store's, the chain's arithmetic is here.
//
// Invariants: Position and Hash are the last committed entry's advanced by
// the entries assigned since Start, in order; each assigned entry carries
// Position = previous + 1, PrevHash = the previous Hash and its own Hash;
// Restore(m) unassigns exactly the entries assigned after m (zeroing their
// position and hashes), so an entry of a rolled-back command or
// transaction never looks committed.
type ChainTail struct {
	pos      int64
	hash     string
	assigned []*auditv1.AuditEntry
}

// ChainMark is a ChainTail's state at a savepoint; the zero mark is the
// state before any entry, for a transaction that is abandoned whole.
type ChainMark struct {
	pos  int64
	hash string
	n    int
}

// Start begins a transaction's view at the committed tail.
func (c *ChainTail) Start(pos int64, hash string) {
	c.pos, c.hash, c.assigned = pos, hash, c.assigned[:0]
}

// Position and Hash are the tail as far as this transaction has assigned.
func (c *ChainTail) Position() int64 { return c.pos }
func (c *ChainTail) Hash() string    { return c.hash }

// Assign gives e the next position and its hashes, and advances the tail.
// The caller stores e's row; if that fails, Restore to a mark taken before
// unassigns e.
func (c *ChainTail) Assign(e *auditv1.AuditEntry) {
	e.Position = c.pos + 1
	e.PrevHash = c.hash
	e.Hash = AuditHash(c.hash, e)
	c.assigned = append(c.assigned, e)
	c.pos, c.hash = e.Position, e.Hash
}

func (c *ChainTail) Mark() ChainMark { return ChainMark{pos: c.pos, hash: c.hash, n: len(c.assigned)} }

// Restore unassigns every entry assigned after m and moves the tail back.
func (c *ChainTail) Restore(m ChainMark) {
	for _, e := range c.assigned[m.n:] {
		e.Position, e.Hash, e.PrevHash = 0, "", ""
	}
	c.assigned = c.assigned[:m.n]
	c.pos, c.hash = m.pos, m.hash
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
// every plan, and of audit entries that name no session.
const DefaultNamespace = "local"
