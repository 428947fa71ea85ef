package persistence

import (
	"sync/atomic"

	"github.com/agentstate/agentstate/messages/errs"
)

// Quota is what one namespace may hold. A zero field is the default: no
// bound on sessions or stored bytes, MaxStateKeys keys per shared scope.
type Quota struct {
	// MaxSessions bounds the namespace's sessions (staged imports count).
	MaxSessions int64
	// MaxScopeKeys bounds the keys of each shared scope of the namespace;
	// at most MaxStateKeys, which bounds every state.
	MaxScopeKeys int
	// MaxBytes bounds the bytes the namespace stores (usage.go says what
	// counts); 0: no bound.
	MaxBytes int64
}

// scopeKeys is the bound on a shared scope's keys under q.
func (q Quota) scopeKeys() int {
	if q.MaxScopeKeys <= 0 || q.MaxScopeKeys > MaxStateKeys {
		return MaxStateKeys
	}
	return q.MaxScopeKeys
}

// Quotas answers the quota of a namespace. The node's is its --auth-file's
// "quotas" section, swapped whole on a reload.
type Quotas interface {
	Quota(namespace string) Quota
}

// QuotaSlot holds a store's Quotas; the zero slot holds none (every
// namespace has the default quota). Stores embed it: SetQuotas takes
// effect from the next transaction on, and a transaction reads the slot
// once, so a reload never changes the bounds halfway through a batch.
//
// Quotas are decided inside the writer's transaction, where every write
// of the store is serialized (and, on PostgreSQL, under the namespace's
// transaction lock, so that writers of several nodes do not race): two
// creates can never both take a namespace's last slot.
type QuotaSlot struct {
	q atomic.Pointer[quotasBox]
}

type quotasBox struct{ Quotas }

// SetQuotas makes q the store's quotas (nil: the defaults).
func (s *QuotaSlot) SetQuotas(q Quotas) {
	if q == nil {
		s.q.Store(nil)
		return
	}
	s.q.Store(&quotasBox{q})
}

// QuotasNow is the quotas in force, for one transaction; nil when none
// is set.
func (s *QuotaSlot) QuotasNow() Quotas {
	if b := s.q.Load(); b != nil {
		return b.Quotas
	}
	return nil
}

// QuotaOf is q's quota of ns (the default quota when q is nil).
func QuotaOf(q Quotas, ns string) Quota {
	if q == nil {
		return Quota{}
	}
	return q.Quota(orDefaultNamespace(ns))
}

func orDefaultNamespace(ns string) string {
	if ns == "" {
		return DefaultScopeNamespace
	}
	return ns
}

// SessionsQuotaError is the refusal of a create that would give namespace
// ns more than max sessions: FAILED_PRECONDITION, a stored quota that
// frees only when sessions of the namespace are deleted.
func SessionsQuotaError(ns string, max int64) error {
	return errs.FailedPrecondition("namespace %q: its quota of %d sessions is reached; delete sessions of the namespace first",
		orDefaultNamespace(ns), max)
}

// NamespaceSpellings are the two values the sessions of namespace ns may
// store: the default namespace is also the empty one.
func NamespaceSpellings(ns string) (name, alias string) {
	ns = orDefaultNamespace(ns)
	if ns == DefaultScopeNamespace {
		return ns, ""
	}
	return ns, ns
}
