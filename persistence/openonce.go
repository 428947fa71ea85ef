package persistence

import (
	"sync"
	"sync/atomic"

	"github.com/agentstate/agentstate/messages/errs"
)

// Shared is the open-once bookkeeping of a store that a Registry hands out:
// a store type embeds it and so implements Shareable. Its fields belong to
// the Registry and are guarded by the Registry's lock.
type Shared struct {
	key, spec string
	unshared  bool
	// refs counts the Opens not yet Closed; 0 means closing or closed.
	refs int
	// ready is closed once the open finished; err is set before it.
	ready chan struct{}
	err   error
	// done is closed once the store is closed, or failed to open.
	done chan struct{}
}

// Share returns the bookkeeping; it exists to make embedding types
// Shareable.
func (s *Shared) Share() *Shared { return s }

// Key is the key the store was opened under.
func (s *Shared) Key() string { return s.key }

// Shareable is a store that embeds Shared.
type Shareable interface{ Share() *Shared }

// SpecMismatch is Open's answer when key is open with another spec (a
// store's options, such as SQLite's synchronous level): one process cannot
// hold one database open two ways.
type SpecMismatch struct{ Key, Have, Want string }

func (e *SpecMismatch) Error() string {
	return "store " + e.Key + " is open with " + e.Have + "; cannot open it with " + e.Want
}

// Registry opens each key's store at most once per process and hands every
// Open of that key the same store, counting references; the last Close
// closes it. One handle per database URL is the fourth seed's fix: two
// engines, two writer connections, for one database is what raced.
//
// Invariants: a key maps to at most one open store; a store is opened once
// (its open runs outside the lock, later Opens of the key wait for it); a
// failed open is forgotten, so the next Open tries again; a store whose
// last reference is closing is waited for, then opened afresh.
type Registry[S Shareable] struct {
	mu     sync.Mutex
	stores map[string]S
	opens  atomic.Int64
}

// Opens is how many opens this registry ran (failed ones included): an
// Open of an open key does not count. Tests use it to prove open-once.
func (r *Registry[S]) Opens() int64 { return r.opens.Load() }

// Open returns key's store: the open one, with one more reference, or a
// new one from newStore, opened by open. spec must equal the open store's
// (else *SpecMismatch).
func (r *Registry[S]) Open(key, spec string, newStore func() S, open func(S) error) (S, error) {
	var zero S
	for {
		r.mu.Lock()
		s, ok := r.stores[key]
		if !ok {
			break // r.mu still held
		}
		sh := s.Share()
		if sh.refs == 0 {
			// Its last handle is closing it: wait, then open afresh.
			r.mu.Unlock()
			<-sh.done
			continue
		}
		if sh.spec != spec {
			r.mu.Unlock()
			return zero, &SpecMismatch{Key: key, Have: sh.spec, Want: spec}
		}
		sh.refs++
		r.mu.Unlock()
		<-sh.ready
		if sh.err != nil {
			return zero, sh.err
		}
		return s, nil
	}
	if r.stores == nil {
		r.stores = map[string]S{}
	}
	s := newStore()
	*s.Share() = Shared{key: key, spec: spec, refs: 1, ready: chan0(), done: chan0()}
	r.stores[key] = s
	r.mu.Unlock()
	return r.run(s, open)
}

// OpenUnshared opens a store of its own under key, outside the registry,
// as a second process would (tests run several nodes on one database from
// one process this way). Its Close closes it.
func (r *Registry[S]) OpenUnshared(key string, newStore func() S, open func(S) error) (S, error) {
	s := newStore()
	*s.Share() = Shared{key: key, unshared: true, refs: 1, ready: chan0(), done: chan0()}
	return r.run(s, open)
}

func (r *Registry[S]) run(s S, open func(S) error) (S, error) {
	var zero S
	sh := s.Share()
	r.opens.Add(1)
	if err := open(s); err != nil {
		r.forget(sh, s)
		sh.err = err
		close(sh.ready)
		close(sh.done)
		return zero, err
	}
	close(sh.ready)
	return s, nil
}

// Close releases one reference of s; the last runs shutdown (outside the
// lock, while new Opens of the key wait) and forgets s. A Close beyond the
// Opens is FAILED_PRECONDITION.
func (r *Registry[S]) Close(s S, shutdown func() error) error {
	sh := s.Share()
	r.mu.Lock()
	if sh.refs <= 0 {
		r.mu.Unlock()
		return errs.FailedPrecondition("store %s is closed more often than it was opened", sh.key)
	}
	sh.refs--
	if sh.refs > 0 {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	err := shutdown()
	r.forget(sh, s)
	close(sh.done)
	return err
}

// forget removes s from the registry if it is the store held for its key.
func (r *Registry[S]) forget(sh *Shared, s S) {
	if sh.unshared {
		return
	}
	r.mu.Lock()
	if cur, ok := r.stores[sh.key]; ok && cur.Share() == sh {
		delete(r.stores, sh.key)
	}
	r.mu.Unlock()
}

func chan0() chan struct{} { return make(chan struct{}) }

// Held reports whether key has a store in the registry (open, opening or
// closing); tests use it to prove nothing is left behind.
func (r *Registry[S]) Held(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.stores[key]
	return ok
}

// Refs is how many Opens of s are not yet Closed.
func (r *Registry[S]) Refs(s S) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return s.Share().refs
}
