package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/postgres"
	"github.com/agentstate/agentstate/persistence/sqlite"
)

// dataURL turns --data and --synchronous into a sqlite.Open URL, creating
// the database's directory.
func dataURL(data, synchronous string) (string, error) {
	switch strings.ToLower(synchronous) {
	case "full", "normal":
	default:
		return "", fmt.Errorf("--synchronous %q: want full or normal", synchronous)
	}
	if data == "" {
		return "", fmt.Errorf("--data is empty; it names the database file, such as ./data/agentstate.db")
	}
	if !strings.HasPrefix(data, "memory:") {
		path := strings.TrimPrefix(data, "file:")
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		// --data names the database file; the directory it is created in
		// (./data for make run) is no database.
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return "", fmt.Errorf("--data %s is a directory; it must name the database file, such as %s",
				data, strings.TrimSuffix(path, "/")+"/agentstate.db")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return "", fmt.Errorf("create the database directory: %w", err)
		}
	}
	if strings.Contains(data, "?") {
		return data, nil
	}
	return data + "?synchronous=" + strings.ToLower(synchronous), nil
}

// openStore opens the store --data names (url is its SQLite URL). On
// failure the Store is an untyped nil: a typed nil pointer in the
// interface would look open to abort, whose Close would then panic and
// hide the cause.
func openStore(data, url string) (persistence.Store, error) {
	if isPostgres(data) {
		octx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := postgres.Open(octx, data)
		if err != nil {
			return nil, storeOpenFailed("open PostgreSQL store", err)
		}
		return st, nil
	}
	st, err := sqlite.Open(url)
	if err != nil {
		return nil, storeOpenFailed("open database "+redactData(data), err)
	}
	return st, nil
}

// storeOpenFailed is the error of a store that could not be opened. The
// store's typed error (INTERNAL, UNAVAILABLE, ...) classifies a request's
// failure for a client; a node that cannot start has no client, so it is
// a local failure (exit 1), whose message says what and why.
func storeOpenFailed(what string, err error) error {
	return fmt.Errorf("%s: %s", what, errs.From(err).Msg)
}
