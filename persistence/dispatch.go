package persistence

import "github.com/agentstate/agentstate/messages/errs"

// Handler applies each command of the closed set. A store's transaction
// (its applier) implements it; Dispatch is the one place that tells the
// commands apart, so a new command is a compile error in every store
// until each handles it. An error that is an *errs.Error is the command's
// own failure (the writer rolls back that command alone); any other error
// fails the whole transaction.
type Handler interface {
	Activate(*Activate) (Result, error)
	CreateSession(*CreateSession) (Result, error)
	AppendMessages(*AppendMessages) (Result, error)
	UpdateSession(*UpdateSession) (Result, error)
	DeleteSession(*DeleteSession) (Result, error)
	PlanWrite(*PlanWrite) (Result, error)
	RecordAudit(*RecordAudit) (Result, error)
	RecordClientAudit(*RecordClientAudit) (Result, error)
	PruneAudit(*PruneAudit) (Result, error)
	TruncateSession(*TruncateSession) (Result, error)
	PutSnapshot(*PutSnapshot) (Result, error)
	ReplaceSuffix(*ReplaceSuffix) (Result, error)
	DeleteSessions(*DeleteSessions) (Result, error)
	UpdateScopes(*UpdateScopes) (Result, error)
}

// Dispatch applies cmd through h.
func Dispatch(h Handler, cmd Command) (Result, error) {
	if cmd == nil {
		return Result{}, errs.InvalidArgument("nil command")
	}
	return cmd.applyTo(h)
}

func (c *Activate) applyTo(h Handler) (Result, error)          { return h.Activate(c) }
func (c *CreateSession) applyTo(h Handler) (Result, error)     { return h.CreateSession(c) }
func (c *AppendMessages) applyTo(h Handler) (Result, error)    { return h.AppendMessages(c) }
func (c *UpdateSession) applyTo(h Handler) (Result, error)     { return h.UpdateSession(c) }
func (c *DeleteSession) applyTo(h Handler) (Result, error)     { return h.DeleteSession(c) }
func (c *PlanWrite) applyTo(h Handler) (Result, error)         { return h.PlanWrite(c) }
func (c *RecordAudit) applyTo(h Handler) (Result, error)       { return h.RecordAudit(c) }
func (c *RecordClientAudit) applyTo(h Handler) (Result, error) { return h.RecordClientAudit(c) }
func (c *PruneAudit) applyTo(h Handler) (Result, error)        { return h.PruneAudit(c) }

// Fence is the owner a command writes for and the epoch it carries; the
// zero Fence (Kind 0) means the command is not an owner's write and no
// epoch guards it (audit records, prunes, and Activate, which takes the
// epoch rather than carrying one).
type Fence struct {
	Kind  OwnerKind
	ID    string
	Epoch int64
}

func (c *Activate) Fence() Fence          { return Fence{} }
func (c *CreateSession) Fence() Fence     { return Fence{OwnerSession, c.Session.GetSessionId(), c.Epoch} }
func (c *AppendMessages) Fence() Fence    { return Fence{OwnerSession, c.SessionID, c.Epoch} }
func (c *UpdateSession) Fence() Fence     { return Fence{OwnerSession, c.SessionID, c.Epoch} }
func (c *DeleteSession) Fence() Fence     { return Fence{OwnerSession, c.SessionID, c.Epoch} }
func (c *PlanWrite) Fence() Fence         { return Fence{OwnerPlan, PlanKey(c.Namespace, c.PlanID), c.Epoch} }
func (c *RecordAudit) Fence() Fence       { return Fence{} }
func (c *RecordClientAudit) Fence() Fence { return Fence{} }
func (c *PruneAudit) Fence() Fence        { return Fence{} }
