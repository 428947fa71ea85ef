package persistence

import auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"

// Touch is what one command writes, as those that watch or batch writes
// see it: the feed hub (which tails to wake after a commit), the writer
// (which records it may merge) and the stores (whether a transaction
// appends to the audit chain, how it lays out and pools message rows,
// which owner rows it locks and which checks it may leave to a command's
// own statements). They ask the command (Command.Touches) rather than
// telling commands apart by type, so a new command, or a wrapper such as
// Activate, cannot hide a write from any of them. Every zero field is the
// safe answer: a command that says nothing is checked and applied alone.
//
// Invariant: a command writes no session's rows but Session's (any
// session's when AnySession), no plan's
// rows but Plan's, and touches the audit chain only if Audit says so. A
// wrapper reports the write it wraps, as its own.
type Touch struct {
	// Session is the session whose rows (the session row, its messages,
	// state, snapshot slot and plan links) the command writes; "" when
	// none.
	Session string
	// AnySession: the command may write the rows of any session (a
	// group's delete, DeleteSessions), which it names only once applied.
	AnySession bool
	// Plan is the plan id whose rows (the plan row, its error records and
	// step counters) the command writes; "" when none. It is the bare id,
	// without the namespace, because it picks the audit chain of the
	// command's entries, which EntryChainKey finds from the entries' plan
	// id: plans of one id in two namespaces share a chain.
	Plan string
	// Audit is what the command does to the audit chain.
	Audit AuditEffect
	// Records are the entries of a stand-alone record (Audit is
	// AuditRecords or AuditClientRecords): a writer may merge them with
	// those of other records of the same effect into one command.
	Records []*auditv1.AuditEntry
	// Messages is how many message rows the command inserts into
	// Session's history (at most; a retried turn inserts none): a store
	// lays out a transaction's rows by it.
	Messages int
	// Check is what the command's own statements check of its fence, and
	// so what a store may leave to them (FenceCheck).
	Check FenceCheck
	// Activates is the owner key whose epoch the command takes (an
	// Activate: its Kind and ID; Epoch 0), which a store locks with the
	// keys it fences; the zero Fence when none. The epoch row is nobody's
	// data: the feed hub and the writer ignore it.
	Activates Fence
}

// FenceCheck is how a command's fence (Fence) can be checked.
type FenceCheck uint8

const (
	// CheckBefore: the store checks the command's epoch before applying
	// it, once every earlier command of the transaction is written.
	CheckBefore FenceCheck = iota
	// CheckOwnerRow: the command's first statement writes its owner's row
	// (a PlanWrite upserts its plan row), so a store may make that write
	// conditional on the epoch instead of reading the epoch first.
	CheckOwnerRow
	// CheckAtAdvance: the command is decided on the sequence its owner
	// holds (a stand-alone AppendMessages, DecideSequence) and needs no
	// row another such command writes: its epoch and sequence may be
	// checked in one compare-and-set of the session row after its rows,
	// so a store may defer its rows and that check and pool them with
	// those of other such commands of the transaction.
	CheckAtAdvance
)

// AuditEffect is what a command does to the audit chain.
type AuditEffect uint8

const (
	// AuditNone: the command leaves the chain alone.
	AuditNone AuditEffect = iota
	// AuditAppends: the command appends entries along with its other
	// writes; they commit or fail with them.
	AuditAppends
	// AuditRecords: the command is nothing but entries to append
	// (RecordAudit), which depend on no other command and none of which
	// can fail on its own: records of one transaction may be merged.
	AuditRecords
	// AuditClientRecords: the command is nothing but entries with client
	// event ids (RecordClientAudit), each stored, found a duplicate or
	// refused on its own: records of one transaction may be merged, the
	// outcomes (RecordClientAudit.ResultOf) told apart by entry.
	AuditClientRecords
	// AuditPrunes: the command removes entries from the chain's start
	// and moves its anchor (PruneAudit); it may append its own.
	AuditPrunes
)

// WritesAudit reports whether the command may write the audit chain, so
// that a store locks the chain's tail before anything else and change
// tails read it after the commit.
func (t Touch) WritesAudit() bool { return t.Audit != AuditNone }

// appends is AuditAppends when entries are carried, else AuditNone.
func appends(entries []*auditv1.AuditEntry) AuditEffect {
	if len(entries) > 0 {
		return AuditAppends
	}
	return AuditNone
}

// Touches of a wrapper is that of the write it wraps, and the key whose
// epoch it takes. Only a stand-alone record may be merged, so a wrapped one
// is reported as appending (WithEpoch folds none today; this keeps a later
// wrapper from being merged away); and only a stand-alone write is checked
// by its own statements: an activation takes the epoch and reads the
// session before its write, so it is checked and applied alone.
func (c *Activate) Touches() Touch {
	var t Touch
	if c.Then != nil {
		t = c.Then.Touches()
	}
	if t.Audit == AuditRecords || t.Audit == AuditClientRecords {
		t.Audit, t.Records = AuditAppends, nil
	}
	t.Check, t.Activates = CheckBefore, Fence{Kind: c.Kind, ID: c.ID}
	return t
}

func (c *CreateSession) Touches() Touch {
	return Touch{Session: c.Session.GetSessionId(), Audit: appends(c.Audit), Messages: len(c.Messages)}
}

func (c *AppendMessages) Touches() Touch {
	t := Touch{Session: c.SessionID, Check: CheckAtAdvance}
	for i := range c.Turns {
		if len(c.Turns[i].Audit) > 0 {
			t.Audit = AuditAppends
		}
		t.Messages += len(c.Turns[i].Messages)
	}
	return t
}

func (c *UpdateSession) Touches() Touch {
	return Touch{Session: c.SessionID, Audit: appends(c.Audit)}
}

func (c *DeleteSession) Touches() Touch {
	return Touch{Session: c.SessionID, Audit: appends(c.Audit)}
}

func (c *TruncateSession) Touches() Touch {
	return Touch{Session: c.SessionID, Audit: appends(c.Audit)}
}

func (c *PutSnapshot) Touches() Touch { return Touch{Session: c.SessionID} }

func (c *PlanWrite) Touches() Touch {
	return Touch{Plan: c.PlanID, Audit: appends(c.Audit), Check: CheckOwnerRow}
}

func (c *RecordAudit) Touches() Touch { return Touch{Audit: AuditRecords, Records: c.Entries} }

func (c *RecordClientAudit) Touches() Touch {
	return Touch{Audit: AuditClientRecords, Records: c.Entries}
}

func (c *PruneAudit) Touches() Touch { return Touch{Audit: AuditPrunes} }
