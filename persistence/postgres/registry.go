package postgres

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/jackc/pgx/v5/pgxpool"
)

// registry maps a registry key (see registryKey) to its one open Store.
//
// Invariant: a key maps to at most one Store, and a shared Store is opened
// at most once. Get-or-create happens under mu, but the open (connect,
// migrate) runs outside it: the creator opens while later callers for the
// same key wait on the Store's ready channel. A failed open is removed, so
// the next Open retries.
var registry = struct {
	mu     sync.Mutex
	stores map[string]*Store
}{stores: map[string]*Store{}}

// opens counts open attempts in this process (failed ones included), for
// tests that prove an open happens once.
var opens atomic.Int64

// Opens returns how many times this process has opened a Store (connected
// and migrated). An Open of a DSN whose Store is open does not count.
func Opens() int64 { return opens.Load() }

// Option changes how Open opens a Store.
type Option func(*options)

type options struct {
	unshared bool
}

// Unshared makes Open open a Store of its own, outside the process's
// registry, with its own writer connection, as a second process (another
// node) would. Its Close closes it. Tests use it to run several "nodes"
// against one database from one process.
func Unshared() Option { return func(o *options) { o.unshared = true } }

// Open returns the Store for dsn, connecting and migrating if no Store of
// this process has it open, else adding a reference to the open one: every
// caller of Open for one database gets the same *Store (unless Unshared),
// and each must call Close once.
//
// dsn is a libpq connection string, URL or key=value form, with pgxpool's
// pool_* parameters for the read pool (pool_max_conns, ...). The schema is
// the first of search_path (a search_path parameter selects another; it
// must exist). ctx bounds connecting and migrating.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errs.InvalidArgument("postgres DSN: %v", err)
	}
	key := registryKey(cfg.ConnConfig)
	if o.unshared {
		s := newStore(key, cfg, true)
		opens.Add(1)
		if err := s.open(ctx); err != nil {
			return nil, err
		}
		close(s.ready)
		return s, nil
	}
	for {
		registry.mu.Lock()
		s, ok := registry.stores[key]
		if !ok {
			break // registry.mu still held
		}
		if s.refs == 0 {
			// The last handle is closing it; wait, then open afresh.
			registry.mu.Unlock()
			<-s.done
			continue
		}
		s.refs++
		registry.mu.Unlock()
		<-s.ready
		if s.openErr != nil {
			return nil, s.openErr
		}
		return s, nil
	}
	s := newStore(key, cfg, false)
	registry.stores[key] = s
	registry.mu.Unlock()

	opens.Add(1)
	if err := s.open(ctx); err != nil {
		registry.mu.Lock()
		delete(registry.stores, key)
		registry.mu.Unlock()
		s.openErr = err
		close(s.ready)
		close(s.done)
		return nil, err
	}
	close(s.ready)
	return s, nil
}

// Close releases one reference; the last one closes the writer connection
// and the read pool. Close must be called once per successful Open; a
// further call is FAILED_PRECONDITION.
func (s *Store) Close() error {
	registry.mu.Lock()
	if s.refs <= 0 {
		registry.mu.Unlock()
		return errs.FailedPrecondition("store %s is closed more often than it was opened", s.key)
	}
	s.refs--
	if s.refs > 0 {
		registry.mu.Unlock()
		return nil
	}
	registry.mu.Unlock()

	err := s.shutdown()

	if !s.unshared {
		registry.mu.Lock()
		delete(registry.stores, s.key)
		registry.mu.Unlock()
	}
	close(s.done)
	return err
}
