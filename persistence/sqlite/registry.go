package sqlite

import (
	"sync"
	"sync/atomic"

	"github.com/agentstate/agentstate/messages/errs"
)

// registry maps a normalized URL (location.key) to its one open Store.
//
// Invariant: a key maps to at most one Store, and a Store is opened at most
// once. Get-or-create happens under mu, but the expensive open runs outside
// it: the creator opens while later callers for the same key wait on the
// Store's ready channel. A failed open is removed, so the next Open retries.
var registry = struct {
	mu     sync.Mutex
	stores map[string]*Store
}{stores: map[string]*Store{}}

// opens counts database opens in this process (attempts, failed ones
// included), for tests that prove an open happens once.
var opens atomic.Int64

// Opens returns how many times this process has opened a database. Every
// Open of a URL that is already open returns the open Store and does not
// count.
func Opens() int64 { return opens.Load() }

// Open returns the Store for url, opening the database if no Store of this
// process has it open, else adding a reference to the open one: every
// caller of Open for one database gets the same *Store, and each must call
// Close once.
//
// URL forms: a path ("./data/x.db", "/abs/x.db"), "file:PATH", or
// "memory:NAME" (an in-memory database shared by every Open of NAME in this
// process). Option: "?synchronous=full" (default) or "?synchronous=normal".
// Opening an open database with a different option is INVALID_ARGUMENT.
func Open(url string) (*Store, error) {
	loc, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	for {
		registry.mu.Lock()
		s, ok := registry.stores[loc.key]
		if !ok {
			break // registry.mu still held
		}
		if s.refs == 0 {
			// The last handle is closing it; wait, then open afresh.
			registry.mu.Unlock()
			<-s.done
			continue
		}
		if s.loc.sync != loc.sync {
			registry.mu.Unlock()
			return nil, errs.InvalidArgument("database %s is open with synchronous=%s; cannot open it with synchronous=%s",
				loc.key, s.loc.sync, loc.sync)
		}
		s.refs++
		registry.mu.Unlock()
		<-s.ready
		if s.openErr != nil {
			return nil, s.openErr
		}
		return s, nil
	}
	s := newStore(loc)
	registry.stores[loc.key] = s
	registry.mu.Unlock()

	opens.Add(1)
	if err := s.open(); err != nil {
		registry.mu.Lock()
		delete(registry.stores, loc.key)
		registry.mu.Unlock()
		s.openErr = err
		close(s.ready)
		close(s.done)
		return nil, err
	}
	close(s.ready)
	return s, nil
}

// Close releases one reference; the last one closes the database. Close
// must be called once per successful Open; a further call is
// FAILED_PRECONDITION.
func (s *Store) Close() error {
	registry.mu.Lock()
	if s.refs <= 0 {
		registry.mu.Unlock()
		return errs.FailedPrecondition("store %s is closed more often than it was opened", s.loc.key)
	}
	s.refs--
	if s.refs > 0 {
		registry.mu.Unlock()
		return nil
	}
	registry.mu.Unlock()

	err := s.shutdown()

	registry.mu.Lock()
	delete(registry.stores, s.loc.key)
	registry.mu.Unlock()
	close(s.done)
	return err
}
