package sqlite

import (
	"errors"
	"strconv"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// registry holds the process's one Store per normalized URL
// (location.key): persistence.Registry keeps the open-once protocol.
var registry persistence.Registry[*Store]

// Opens returns how many times this process has opened a database. Every
// Open of a URL that is already open returns the open Store and does not
// count.
func Opens() int64 { return registry.Opens() }

// Open returns the Store for url, opening the database if no Store of this
// process has it open, else adding a reference to the open one: every
// caller of Open for one database gets the same *Store, and each must call
// Close once.
//
// URL forms: a path ("./data/x.db", "/abs/x.db"), "file:PATH", or
// "memory:NAME" (an in-memory database shared by every Open of NAME in this
// process). Options: "synchronous=full" (default) or "synchronous=normal";
// "cache_kib=N", each connection's page cache in KiB (default
// DefaultCacheKiB; a Store has up to 10 connections), as in
// "x.db?synchronous=normal&cache_kib=512". Opening an open database with a
// different option is INVALID_ARGUMENT.
func Open(url string) (*Store, error) {
	loc, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	s, err := registry.Open(loc.key, "synchronous="+string(loc.sync)+"&cache_kib="+strconv.Itoa(loc.cacheKiB), func() *Store { return newStore(loc) }, (*Store).open)
	var mismatch *persistence.SpecMismatch
	if errors.As(err, &mismatch) {
		return nil, errs.InvalidArgument("database %s is open with %s; cannot open it with %s", loc.key, mismatch.Have, mismatch.Want)
	}
	return s, err
}

// Close releases one reference; the last one closes the database. Close
// must be called once per successful Open; a further call is
// FAILED_PRECONDITION.
func (s *Store) Close() error { return registry.Close(s, s.shutdown) }
