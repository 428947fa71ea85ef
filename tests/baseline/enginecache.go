package baseline

import (
	"database/sql"
	"runtime"
	"sync"
	"sync/atomic"
)

// MemoryURL is the only URL upstream caches: the in-memory SQLite database
// that every UnitOfWork of the process is meant to share (#4156).
const MemoryURL = "sqlite:///:memory:"

// Engine stands for a SQLAlchemy Engine: a handle on one database with its
// own connection pool. Two Engines for MemoryURL are two different
// databases: what one UnitOfWork writes, the other never sees.
type Engine struct {
	URL string
	DB  *sql.DB
}

// EngineCache ports engine_cache.py's module-level
// `MEMORY_ENGINES: dict[str, Engine] = {}` together with the code that
// fills it (unit_of_work.py, lines 76–84). A Python module global is one
// per process; a Go value lets each test start from an empty cache.
//
// It keeps the seed's defect on purpose (seed 004): the lookup and the
// store are separate map operations (mu, standing for the GIL, guards each
// one alone), so two UnitOfWorks that start together both miss, both
// create an engine, and the second store replaces the first.
type EngineCache struct {
	// mu stands for the GIL: one map operation at a time.
	mu      sync.Mutex
	engines map[string]*Engine
	created atomic.Int64
}

// NewEngineCache returns an empty cache.
func NewEngineCache() *EngineCache {
	return &EngineCache{engines: make(map[string]*Engine)}
}

// Created reports how many engines create_engine built: more than one per
// URL is the bug.
func (c *EngineCache) Created() int64 { return c.created.Load() }

// createEngine mirrors create_engine(url, ..., connect_args=
// {"check_same_thread": False}): it builds the engine and its pool but,
// like SQLAlchemy, connects lazily.
func (c *EngineCache) createEngine(url string) (*Engine, error) {
	c.created.Add(1)
	// create_engine is a deal of Python work (URL parsing, dialect
	// import and set-up, pool construction) between the check and the
	// set, during which CPython may switch threads. Gosched stands for
	// that switch point; sql.Open alone is too quick to show it.
	runtime.Gosched()
	db, err := sql.Open("sqlite3", "file::memory:")
	if err != nil {
		return nil, err
	}
	// An in-memory database lives in one connection; the pool must not
	// open a second (which would be yet another database).
	db.SetMaxOpenConns(1)
	return &Engine{URL: url, DB: db}, nil
}

// UnitOfWork ports the part of UnitOfWork the race lives in: its engine
// property.
type UnitOfWork struct {
	DatabaseURL string

	cache  *EngineCache
	engine *Engine
	// built is the engine this UnitOfWork's own call created, if any; it
	// may have been discarded from the cache by a racing store.
	built *Engine
}

// NewUnitOfWork returns a UnitOfWork on url that resolves its engine
// through cache.
func NewUnitOfWork(cache *EngineCache, url string) *UnitOfWork {
	return &UnitOfWork{DatabaseURL: url, cache: cache}
}

// Engine mirrors the engine property (unit_of_work.py 76–84):
//
//	if self.database_url not in MEMORY_ENGINES:
//	    MEMORY_ENGINES[self.database_url] = create_engine(...)
//	self._engine = MEMORY_ENGINES[self.database_url]
//
// Not safe for concurrent use on one UnitOfWork (neither is upstream's);
// safe across UnitOfWorks in the GIL sense.
func (u *UnitOfWork) Engine() (*Engine, error) {
	if u.engine != nil {
		return u.engine, nil
	}
	c := u.cache
	c.mu.Lock()
	_, ok := c.engines[u.DatabaseURL] // not in MEMORY_ENGINES
	c.mu.Unlock()
	if !ok {
		e, err := c.createEngine(u.DatabaseURL)
		if err != nil {
			return nil, err
		}
		u.built = e
		c.mu.Lock()
		c.engines[u.DatabaseURL] = e // MEMORY_ENGINES[url] = create_engine(...)
		c.mu.Unlock()
	}
	c.mu.Lock()
	u.engine = c.engines[u.DatabaseURL] // self._engine = MEMORY_ENGINES[url]
	c.mu.Unlock()
	return u.engine, nil
}

// Close closes the engine this UnitOfWork created, if any. (Upstream never
// closes a discarded engine; tests must not leak them.)
func (u *UnitOfWork) Close() error {
	if u.built == nil {
		return nil
	}
	return u.built.DB.Close()
}
