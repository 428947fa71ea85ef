package persistence

import (
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

// Retention (issue 18): truncation, the snapshot slot and expiry. Each is
// a session owner's write, fenced by its epoch like the others.

// TruncateSession removes the session's messages with sequence <= Through,
// lowest first, at most Limit of them (Limit > 0) per command, and moves
// first_sequence past what it removed. The next sequence never changes:
// Akka's rule that the highest sequence never goes back. its ResultOf
// says how many went; fewer than Limit (or Limit 0) means the truncation
// is complete. A missing session is NOT_FOUND.
type TruncateSession struct {
	Epoch     int64
	SessionID string
	Through   int64
	Limit     int
	UpdatedAt time.Time
	Audit     []*auditv1.AuditEntry
}

// PutSnapshot writes the session's snapshot slot: Snapshot replaces it;
// with Snapshot nil, the slot is emptied if its snapshot's sequence is <=
// DeleteThrough (ResultOf says Removed 1 when it was). A missing session is
// NOT_FOUND.
type PutSnapshot struct {
	Epoch         int64
	SessionID     string
	Snapshot      *sessionv1.Snapshot
	DeleteThrough int64
}

// MaxSnapshotBytes bounds one snapshot.
const MaxSnapshotBytes = 4 << 20

func (c *TruncateSession) Size() int { return rowOverhead + auditSize(c.Audit) }
func (c *PutSnapshot) Size() int     { return rowOverhead + len(c.Snapshot.GetData()) }

func (c *TruncateSession) Fence() Fence { return Fence{OwnerSession, c.SessionID, c.Epoch} }
func (c *PutSnapshot) Fence() Fence     { return Fence{OwnerSession, c.SessionID, c.Epoch} }

func (c *TruncateSession) applyTo(h Handler) (Result, error) { return h.TruncateSession(c) }
func (c *PutSnapshot) applyTo(h Handler) (Result, error)     { return h.PutSnapshot(c) }
