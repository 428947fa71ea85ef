package postgres

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// closeTimeout bounds closing the writer connection (a Terminate message).
const closeTimeout = 5 * time.Second

// Store is one PostgreSQL schema as seen from this process. It implements
// persistence.Store.
//
// Invariants: wconn is the only connection of this Store that writes, and
// it is never in the read pool, whose connections run with
// default_transaction_read_only=on; at most one Writer is held at a time.
// Other processes (nodes) have Stores of their own on the same schema; what
// keeps their writes apart is in the database (see the package doc).
type Store struct {
	key string
	// The registry's open-once bookkeeping (registry.go).
	persistence.Shared
	// The namespaces' quotas, read once per transaction.
	persistence.QuotaSlot

	// Set by open, read-only afterwards.
	wcfg          *pgx.ConnConfig
	pcfg          *pgxpool.Config
	pool          *pgxpool.Pool
	reader        *sqlstore.Reader
	migrationRuns int
	// chains is the audit trail's chain count as last read (chains.go);
	// guarded by wmu after open. wantChains is the DSN's audit_chains.
	chains, wantChains int
	// sinceCheckpoint counts this Store's chain transactions since it
	// last wrote a checkpoint, at lastCheckpoint (checkpoint.go); guarded
	// by wmu.
	sinceCheckpoint int
	lastCheckpoint  time.Time
	// ownChain is the chain this writer locked last for entries that may
	// go on any chain (chains.go): it tries it first next time, so that
	// each node's writer keeps to a chain of its own. Guarded by wmu.
	ownChain int

	// wmu serializes everything that uses the writer connection: Apply,
	// Writer, reconnects and the test hooks. It guards the fields below.
	wmu persistence.WriterSlot
	// wconn is nil while there is no live writer connection (it died and
	// the next Apply reconnects).
	wconn    *pgx.Conn
	readOnly bool
	// shard is wconn's shard of the totals of stored bytes (usageshards.go).
	shard int16
	// connects counts writer connections made, retries transactions run
	// again, replays batches run again with savepoints (for tests and
	// diagnosis).
	connects int
	retries  int
	replays  int
	// retried is the error of the last attempt that was run again.
	retried error
	// Test hooks: commit commits tx (tests lose its answer); afterCommand,
	// when set, runs after each command of an attempt; unordered skips the
	// up-front owner locks (lockorder.go), as writers did before them, so
	// that tests can show the deadlocks those locks prevent.
	commit       func(ctx context.Context, tx pgx.Tx) error
	afterCommand func(i int)
	unordered    bool
}

var _ persistence.Store = (*Store)(nil)

func newStore(key string, cfg *pgxpool.Config) *Store {
	return &Store{
		key:            key,
		wcfg:           cfg.ConnConfig.Copy(),
		pcfg:           cfg,
		commit:         func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
		lastCheckpoint: time.Now(),
		// Nodes start on chains of their own as likely as not; a clash
		// moves one of them on at its first wait (ownChainSQL).
		ownChain: rand.IntN(persistence.MaxAuditChains),
	}
}

// open connects the writer, migrates through it, and starts the read pool.
func (s *Store) open(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			s.closeConns()
		}
	}()
	if err := s.connect(ctx); err != nil {
		return err
	}
	if s.migrationRuns, err = migrate(ctx, s.wconn); err != nil {
		return storeErr("migrate "+s.key, err)
	}
	if err := s.wconn.QueryRow(ctx, "SELECT count(*) FROM audit_chains").Scan(&s.chains); err != nil {
		return storeErr("open "+s.key, err)
	}
	if s.wantChains > s.chains {
		if err := s.partition(ctx, s.wconn, s.wantChains); err != nil {
			return err
		}
	}
	// Reads can never write, whatever the code asks of them.
	s.pcfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	if s.pool, err = pgxpool.NewWithConfig(ctx, s.pcfg); err != nil {
		return storeErr("open read pool of "+s.key, err)
	}
	if err := s.pool.Ping(ctx); err != nil {
		return storeErr("open read pool of "+s.key, err)
	}
	s.reader = sqlstore.NewReader(poolDB{pool: s.pool}, &reader{pool: s.pool})
	return nil
}

// connect makes a new writer connection. Called from open, or with wmu held.
func (s *Store) connect(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, s.wcfg.Copy())
	if err != nil {
		return storeErr("connect "+s.key, err)
	}
	if s.readOnly {
		if _, err := conn.Exec(ctx, "SET default_transaction_read_only = on"); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return storeErr("connect "+s.key, err)
		}
	}
	if s.shard, err = pickShard(ctx, conn); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return storeErr("connect "+s.key, err)
	}
	s.wconn = conn
	s.connects++
	return nil
}

// liveConn returns the writer connection, reconnecting if it died. Called
// with wmu held.
func (s *Store) liveConn(ctx context.Context) (*pgx.Conn, error) {
	if s.wconn != nil && !s.wconn.IsClosed() {
		return s.wconn, nil
	}
	s.dropConn()
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	return s.wconn, nil
}

// dropConn closes and forgets the writer connection. Called with wmu held
// (or from open and shutdown).
func (s *Store) dropConn() {
	if s.wconn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	s.wconn.Close(ctx)
	s.wconn = nil
}

func (s *Store) closeConns() {
	s.dropConn()
	if s.pool != nil {
		s.pool.Close()
	}
}

// shutdown closes the connections once the last handle is gone. A Writer
// still held afterwards fails with UNAVAILABLE, and so do reads.
func (s *Store) shutdown() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wmu.Close()
	s.closeConns()
	return nil
}

// Reader returns the read side, on the read-only pool.
func (s *Store) Reader() persistence.Reader { return s.reader }

// Writer hands out the sole writer.
func (s *Store) Writer() (persistence.Writer, error) {
	lease, err := s.wmu.Take(s.key)
	if err != nil {
		return nil, err
	}
	return &writer{WriterLease: lease, s: s}, nil
}

// Key returns the registry key: the DSN normalized, without the password.
func (s *Store) Key() string { return s.key }

// MigrationRuns returns how many schema migrations this Store applied when
// it opened: len(migrations) for a new schema, 0 for one that was current.
func (s *Store) MigrationRuns() int { return s.migrationRuns }

// SetReadOnly (a test hook, storetest.ReadOnlySwitch) makes the writer's
// transactions read-only, so that every write fails as on a server in
// recovery or a read-only replica (SQLSTATE 25006, UNAVAILABLE); false
// undoes it. It survives reconnects.
func (s *Store) SetReadOnly(on bool) error {
	if err := s.wmu.LockOpen(s.key); err != nil {
		return err
	}
	defer s.wmu.Unlock()
	s.readOnly = on
	if s.wconn == nil || s.wconn.IsClosed() {
		return nil // the next connect applies it
	}
	value := "off"
	if on {
		value = "on"
	}
	_, err := s.wconn.Exec(context.Background(), "SET default_transaction_read_only = "+value)
	return storeErr("set read-only", err)
}
