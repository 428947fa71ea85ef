package persistence

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
)

// AuditHash returns the hash that chains e onto prev: the lowercase hex
// SHA-256 of prev (the previous entry's hash as its hex string, "" for the
// first entry ever) followed by AuditCanonical(e).
//
// Every Writer implementation must set Hash = AuditHash(PrevHash, e) on each
// audit entry it commits, and the audit service's Verify recomputes it with
// this very function; the two must never diverge.
func AuditHash(prev string, e *auditv1.AuditEntry) string { return AuditChainHash(prev, 0, e) }

// AuditChainHash is AuditHash of an entry of chain: for chain 0 (the only
// chain before partitioning, so every older entry) the same; for another
// chain, an entry with a principal has the chain's number appended to its
// canonical form as one more netstring, so moving an entry to another
// chain breaks its link even where prev_hash would match.
func AuditChainHash(prev string, chain int, e *auditv1.AuditEntry) string {
	// One buffer for prev and the canonical form, one digest, one string:
	// the writer hashes every entry it commits, on its one serial path.
	var stack [1024]byte
	b := appendCanonical(append(stack[:0], prev...), e)
	if chain != 0 && e.GetPrincipal() != "" {
		b = appendNetstring(b, strconv.Itoa(chain))
	}
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
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
// followed, when principal is set, by two more netstrings:
//
//	principal, namespace
//
// Every entry committed since principals are recorded has a principal
// (PrepareEntry sees to it), so its hash covers who caused it and where it
// belongs: blanking, changing or adding either breaks the entry's link.
// Entries committed before have none, and keep their nine-field form (and
// their hash) unchanged: the two forms cannot collide, since a netstring
// sequence parses one way only and they differ in length.
//
// Position, Hash and PrevHash are not covered: the chain itself (each hash
// covers the previous one) is what fixes order.
func AuditCanonical(e *auditv1.AuditEntry) []byte { return appendCanonical(nil, e) }

// appendCanonical appends AuditCanonical(e) to b.
func appendCanonical(b []byte, e *auditv1.AuditEntry) []byte {
	fields := [...]string{
		e.GetEventId(), e.GetEventType(), e.GetPlanId(), e.GetSessionId(),
		e.GetProjectName(), e.GetActorName(), e.GetUserIdentity(),
		e.GetDetailsJson(),
	}
	n := len(time.RFC3339Nano) + len(e.GetPrincipal()) + len(e.GetNamespace()) + 24
	for _, f := range fields {
		n += len(f) + 8
	}
	b = slices.Grow(b, n)
	for _, f := range fields {
		b = appendNetstring(b, f)
	}
	// created_at, formatted in place: "" when unset.
	var stamp [len(time.RFC3339Nano) + 8]byte
	created := stamp[:0]
	if ts := e.GetCreatedAt(); ts != nil {
		created = ts.AsTime().UTC().AppendFormat(created, time.RFC3339Nano)
	}
	b = strconv.AppendInt(b, int64(len(created)), 10)
	b = append(b, ':')
	b = append(b, created...)
	b = append(b, ',')
	if p := e.GetPrincipal(); p != "" {
		b = appendNetstring(b, p)
		b = appendNetstring(b, e.GetNamespace())
	}
	return b
}

func appendNetstring(b []byte, f string) []byte {
	b = strconv.AppendInt(b, int64(len(f)), 10)
	b = append(b, ':')
	b = append(b, f...)
	return append(b, ',')
}
