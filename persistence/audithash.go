package persistence

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
)

// AuditHash returns the hash that chains e onto prev: the lowercase hex
// SHA-256 of prev (the previous entry's hash as its hex string, "" for the
// first entry ever) followed by AuditCanonical(e).
//
// Every Writer implementation must set Hash = AuditHash(PrevHash, e) on each
// audit entry it commits, and the audit actor's verifier recomputes it with
// this very function; the two must never diverge.
func AuditHash(prev string, e *auditv1.AuditEntry) string {
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write(AuditCanonical(e))
	return hex.EncodeToString(h.Sum(nil))
}

// AuditCanonical is the canonical byte form of an entry that its hash
// covers. It is these nine fields, in this order, each written as a
// netstring ("<decimal byte length>:<bytes>,"), so that no two distinct
// entries share a form:
//
//	event_id, event_type, plan_id, session_id, project_name, actor_name,
//	user_identity, details_json (exactly as stored),
//	created_at (RFC 3339 with nanoseconds, UTC; "" when unset)
//
// Position, Hash and PrevHash are not covered: the chain itself (each hash
// covers the previous one) is what fixes order.
func AuditCanonical(e *auditv1.AuditEntry) []byte {
	created := ""
	if ts := e.GetCreatedAt(); ts != nil {
		created = ts.AsTime().UTC().Format(time.RFC3339Nano)
	}
	fields := [...]string{
		e.GetEventId(), e.GetEventType(), e.GetPlanId(), e.GetSessionId(),
		e.GetProjectName(), e.GetActorName(), e.GetUserIdentity(),
		e.GetDetailsJson(), created,
	}
	n := 0
	for _, f := range fields {
		n += len(f) + 8
	}
	b := make([]byte, 0, n)
	for _, f := range fields {
		b = strconv.AppendInt(b, int64(len(f)), 10)
		b = append(b, ':')
		b = append(b, f...)
		b = append(b, ',')
	}
	return b
}
