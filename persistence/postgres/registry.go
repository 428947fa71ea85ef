package postgres

import (
	"context"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/jackc/pgx/v5/pgxpool"
)

// registry holds the process's one Store per registry key (see
// registryKey): persistence.Registry keeps the open-once protocol.
var registry persistence.Registry[*Store]

// Opens returns how many times this process has opened a Store (connected
// and migrated). An Open of a DSN whose Store is open does not count.
func Opens() int64 { return registry.Opens() }

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
// must exist). The audit trail is partitioned into audit_chains=N chains
// (PartitionAudit; persistence.MaxAuditChains without the parameter) if
// it has fewer; audit_chains=1 keeps one. ctx bounds connecting and
// migrating.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errs.InvalidArgument("postgres DSN: %v", err)
	}
	chains, err := auditChainsParam(cfg.ConnConfig)
	if err != nil {
		return nil, err
	}
	key := registryKey(cfg.ConnConfig)
	mk := func() *Store {
		s := newStore(key, cfg)
		s.wantChains = chains
		return s
	}
	open := func(s *Store) error { return s.open(ctx) }
	if o.unshared {
		return registry.OpenUnshared(key, mk, open)
	}
	return registry.Open(key, "", mk, open)
}

// Close releases one reference; the last one closes the writer connection
// and the read pool. Close must be called once per successful Open; a
// further call is FAILED_PRECONDITION.
func (s *Store) Close() error { return registry.Close(s, s.shutdown) }
