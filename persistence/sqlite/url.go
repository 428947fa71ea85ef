package sqlite

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentstate/agentstate/messages/errs"
)

// Synchronous is the durability level of commits.
type Synchronous string

const (
	// SyncFull fsyncs the WAL on every commit: a committed transaction
	// survives power loss. The default.
	SyncFull Synchronous = "FULL"
	// SyncNormal fsyncs only at checkpoints: a commit survives a crash of
	// the process but the last transactions may be lost on power loss.
	SyncNormal Synchronous = "NORMAL"
)

// location is a parsed, normalized Open URL.
type location struct {
	// key identifies the database in the registry: "file:" + the absolute,
	// cleaned path, or "memory:" + the name.
	key string
	// memory is the name of a shared in-memory database; path is empty.
	memory string
	path   string
	sync   Synchronous
	// cacheKiB is each connection's page cache (SQLite's cache_size, in
	// KiB); a Store has readerConns readers, the writer and, for a file,
	// the checkpointer, so their caches together hold at most about
	// (readerConns+2) × cacheKiB.
	cacheKiB int
}

// DefaultCacheKiB is each connection's page cache by default: SQLite's own
// default (cache_size -2000), so 20 MB for a file database's 10
// connections once the database outgrows them.
const DefaultCacheKiB = 2000

// maxCacheKiB bounds cache_kib (1 GiB per connection).
const maxCacheKiB = 1 << 20

// parseURL accepts "memory:NAME", "file:PATH" and a bare PATH, each with
// optional "?synchronous=normal|full" and "cache_kib=N" (joined by &).
func parseURL(raw string) (location, error) {
	var loc location
	if raw == "" {
		return loc, errs.InvalidArgument("database url is empty; want a path, file:PATH or memory:NAME")
	}
	body, query, _ := strings.Cut(raw, "?")
	loc.sync, loc.cacheKiB = SyncFull, DefaultCacheKiB
	if query != "" {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return loc, errs.InvalidArgument("database url %q: bad query: %v", raw, err)
		}
		for k, v := range vals {
			switch k {
			case "synchronous":
				if len(v) != 1 {
					return loc, errs.InvalidArgument("database url %q: synchronous given %d times", raw, len(v))
				}
				switch strings.ToLower(v[0]) {
				case "full":
					loc.sync = SyncFull
				case "normal":
					loc.sync = SyncNormal
				default:
					return loc, errs.InvalidArgument("database url %q: synchronous=%q; want normal or full", raw, v[0])
				}
			case "cache_kib":
				n, err := strconv.Atoi(v[0])
				if len(v) != 1 || err != nil || n < 64 || n > maxCacheKiB {
					return loc, errs.InvalidArgument("database url %q: cache_kib=%q; want one number of KiB, 64..%d", raw, v[0], maxCacheKiB)
				}
				loc.cacheKiB = n
			default:
				return loc, errs.InvalidArgument("database url %q: unknown option %q (known: synchronous, cache_kib)", raw, k)
			}
		}
	}
	switch {
	case strings.HasPrefix(body, "memory:"):
		name := strings.TrimPrefix(body, "memory:")
		if !validMemoryName(name) {
			return loc, errs.InvalidArgument("database url %q: memory name must be 1-64 of [A-Za-z0-9._-]", raw)
		}
		loc.memory = name
		loc.key = "memory:" + name
		return loc, nil
	case body == ":memory:":
		return loc, errs.InvalidArgument("database url %q: use memory:NAME for an in-memory database", raw)
	case strings.HasPrefix(body, "file:"):
		body = strings.TrimPrefix(body, "file:")
	}
	if body == "" {
		return loc, errs.InvalidArgument("database url %q has no path", raw)
	}
	abs, err := filepath.Abs(filepath.Clean(body))
	if err != nil {
		return loc, errs.InvalidArgument("database url %q: %v", raw, err)
	}
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		return loc, errs.InvalidArgument("database url %q names a directory", raw)
	}
	loc.path = abs
	loc.key = "file:" + abs
	return loc, nil
}

func validMemoryName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// Pragmas every connection gets through its DSN. busy_timeout makes a
// connection wait for a lock instead of failing at once.
const busyTimeoutMillis = 10000

// writerDSN is the DSN of the sole writer connection: transactions begin
// IMMEDIATE so the write lock is taken up front, never upgraded mid-way.
func (l location) writerDSN() string {
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Set("_busy_timeout", strconv.Itoa(busyTimeoutMillis))
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", string(l.sync))
	q.Set("_stmt_cache_size", "64")
	q.Set("_cache_size", strconv.Itoa(-l.cacheKiB))
	return l.dsn(q, true)
}

// readerDSN is the DSN of the read-only pool: query_only makes every write
// fail with SQLITE_READONLY on these connections.
func (l location) readerDSN() string {
	q := url.Values{}
	q.Set("_query_only", "1")
	q.Set("_busy_timeout", strconv.Itoa(busyTimeoutMillis))
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", string(l.sync))
	q.Set("_stmt_cache_size", "32")
	q.Set("_cache_size", strconv.Itoa(-l.cacheKiB))
	return l.dsn(q, false)
}

func (l location) dsn(q url.Values, writer bool) string {
	if l.memory != "" {
		// memdb: one database per "/NAME" shared by every connection of
		// the process. It has no WAL; its rollback journal lives in memory.
		q.Set("vfs", "memdb")
		if writer {
			q.Set("_journal_mode", "MEMORY")
		}
		return "file:/" + l.memory + "?" + q.Encode()
	}
	q.Set("_journal_mode", "WAL")
	u := url.URL{Scheme: "file", Path: l.path, RawQuery: q.Encode()}
	return u.String()
}
