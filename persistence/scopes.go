package persistence

import (
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// UpdateScopes (issue 30) writes shared scopes without a session: its
// normalized deltas apply in order, each scope read and rewritten inside
// the transaction (as a turn's scope deltas are), in one command with its
// audit entry. A delta that would make a scope too large fails the
// command whole (INVALID_ARGUMENT).
//
// Idempotent retries: when Retry is set, Audit's event id names the
// client's request (the service derives it from the request id), and the
// store looks it up first: stored with the same content (SameAuditContent,
// whose details carry the deltas' digest), the command is a duplicate
// and writes nothing; stored with other content, ALREADY_EXISTS. So a
// request id is remembered exactly as long as its audit entry is kept
// (PruneAudit bounds both).
type UpdateScopes struct {
	Scopes    []ScopeDelta
	UpdatedAt time.Time
	Audit     *auditv1.AuditEntry
	Retry     bool
}

// ScopeWrite is one scope's new state, as a store computes it.
type ScopeWrite struct {
	Scope, State string
	// Prev is the bytes of the scope's state as the command found it
	// stored (0: no row), the same in every write of the scope.
	Prev int64
}

// ScopeCharges are what writing ws (in order: the last write of a scope
// is what it stores) would add to their namespaces (usage.go).
func ScopeCharges(ws []ScopeWrite) []Charge {
	out := make([]Charge, 0, len(ws))
	for i, w := range ws {
		last := true
		for _, later := range ws[i+1:] {
			if later.Scope == w.Scope {
				last = false
				break
			}
		}
		if last {
			out = append(out, Charge{Namespace: ScopeNamespace(w.Scope), Bytes: int64(len(w.State)) - w.Prev})
		}
	}
	return out
}

// BookScopes books writing ws in u.
func BookScopes(u *Usage, ws []ScopeWrite) {
	for _, c := range ScopeCharges(ws) {
		u.AddNamespace(c.Namespace, c.Bytes)
	}
}

// ScopesResult is the outcome of an UpdateScopes.
type ScopesResult struct {
	// The scopes after the write, in the order of each scope's first
	// delta; none for a duplicate (the caller reads them as they stand).
	Scopes    []ScopeWrite
	Duplicate bool
}

// Result returns a Result carrying x.
func (x ScopesResult) Result() Result { var r Result; r.own.scopes = &x; return r }

// ResultOf returns the outcome r carries of c.
func (c *UpdateScopes) ResultOf(r Result) ScopesResult {
	if r.own.scopes == nil {
		return ScopesResult{}
	}
	return *r.own.scopes
}

func (c *UpdateScopes) Size() int {
	n := rowOverhead + auditSize([]*auditv1.AuditEntry{c.Audit})
	for _, d := range c.Scopes {
		n += rowOverhead + len(d.Scope)
		for k, v := range d.Delta.GetSetJson() {
			n += len(k) + len(v)
		}
	}
	return n
}

func (c *UpdateScopes) Fence() Fence                      { return Fence{} }
func (c *UpdateScopes) Touches() Touch                    { return Touch{Audit: AuditAppends} }
func (c *UpdateScopes) applyTo(h Handler) (Result, error) { return h.UpdateScopes(c) }

// ScopesDialect is what ApplyUpdateScopes needs of a store, inside the
// command's transaction (and savepoint).
type ScopesDialect interface {
	// StoredAudit returns the stored entry with this event id (nil when
	// none), the transaction's own queued entries included.
	StoredAudit(eventID string) (*auditv1.AuditEntry, error)
	// ComputeScopes reads each scope and applies its deltas in order
	// (ApplyDelta); a scope's error is the command's.
	ComputeScopes(ds []ScopeDelta) ([]ScopeWrite, error)
	// WriteScopes stores the states, updated at at (Unix nanoseconds).
	WriteScopes(ws []ScopeWrite, at int64) error
	// Audit appends entries to the chain.
	Audit(entries []*auditv1.AuditEntry) error
}

// CheckedScopes is d whose WriteScopes first checks the writes against
// their namespaces' quotas of stored bytes (u's): UpdateScopes' dialect.
// A turn or a create checks its scopes with the rest of its bytes.
func CheckedScopes(d ScopesDialect, u *Usage) ScopesDialect { return checkedScopes{d, u} }

type checkedScopes struct {
	ScopesDialect
	u *Usage
}

func (c checkedScopes) WriteScopes(ws []ScopeWrite, at int64) error {
	if err := c.u.Check(ScopeCharges(ws)...); err != nil {
		return err
	}
	return c.ScopesDialect.WriteScopes(ws, at)
}

// ApplyUpdateScopes applies c through the store's dialect d. It is every
// store's Handler.UpdateScopes.
func ApplyUpdateScopes(c *UpdateScopes, d ScopesDialect) (Result, error) {
	if len(c.Scopes) == 0 {
		return Result{}, errs.InvalidArgument("update scopes: no scope delta")
	}
	if c.Audit == nil {
		return Result{}, errs.InvalidArgument("update scopes: no audit entry")
	}
	if c.Retry {
		stored, err := d.StoredAudit(c.Audit.GetEventId())
		if err != nil {
			return Result{}, err
		}
		if stored != nil {
			if !SameAuditContent(stored, c.Audit) {
				return Result{}, errs.AlreadyExists("request id of event %s was used for another update", c.Audit.GetEventId())
			}
			return ScopesResult{Duplicate: true}.Result(), nil
		}
	}
	at, err := StoredTimeNanos("updated_at", c.UpdatedAt)
	if err != nil {
		return Result{}, err
	}
	ws, err := d.ComputeScopes(c.Scopes)
	if err != nil {
		return Result{}, err
	}
	// The last state of each scope, in the order of its first delta.
	var out []ScopeWrite
	for _, w := range ws {
		found := false
		for i := range out {
			if out[i].Scope == w.Scope {
				out[i], found = w, true
			}
		}
		if !found {
			out = append(out, w)
		}
	}
	if err := d.WriteScopes(out, at); err != nil {
		return Result{}, err
	}
	if err := d.Audit([]*auditv1.AuditEntry{c.Audit}); err != nil {
		return Result{}, err
	}
	return ScopesResult{Scopes: out}.Result(), nil
}
