package persistence

import (
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"google.golang.org/protobuf/proto"
)

// Sizes are estimates for batch bounds, not exact byte counts: they count
// the variable-length payload and a fixed overhead per row.
const rowOverhead = 64

func auditSize(es []*auditv1.AuditEntry) int {
	n := 0
	for _, e := range es {
		n += rowOverhead + len(e.GetDetailsJson()) + len(e.GetEventType())
	}
	return n
}

func (c *CreateSession) Size() int {
	n := rowOverhead + proto.Size(c.Session) + auditSize(c.Audit)
	for _, m := range c.Messages {
		n += rowOverhead + len(m.GetContent()) + len(m.GetMetadataJson())
	}
	return n
}

func (c *AppendMessages) Size() int {
	n := rowOverhead
	for _, t := range c.Turns {
		for _, m := range t.Messages {
			n += rowOverhead + len(m.GetContent()) + len(m.GetMetadataJson())
		}
		n += auditSize(t.Audit)
	}
	return n
}

func (c *UpdateSession) Size() int { return rowOverhead + auditSize(c.Audit) }
func (c *DeleteSession) Size() int { return rowOverhead + auditSize(c.Audit) }

func (c *PlanWrite) Size() int {
	n := rowOverhead + len(c.ErrorDetailsJSON) + auditSize(c.Audit) + rowOverhead*len(c.StepRetries)
	for _, r := range c.Records {
		n += rowOverhead + len(r.GetMessage()) + len(r.GetAttributesJson()) + len(r.GetStackSummary())
	}
	return n
}

func (c *RecordAudit) Size() int { return auditSize(c.Entries) }
func (c *PruneAudit) Size() int  { return rowOverhead + auditSize(c.Audit) }
