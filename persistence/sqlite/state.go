package sqlite

import (
	"database/sql"
	"errors"

	"github.com/agentstate/agentstate/persistence"
)

// Shared scopes are read and rewritten inside the writer's transaction, so
// their deltas apply in commit order whoever sends them. A turn's scopes
// are all computed before any is written: a delta that fails (too large)
// fails its turn with nothing of it written, also in an attempt without
// savepoints, which cannot undo a statement.

// ComputeScopes (persistence.ScopesDialect) computes the new states of
// ds, reading each scope's stored one (or the one an earlier delta of ds
// produced).
func (a *applier) ComputeScopes(ds []persistence.ScopeDelta) ([]persistence.ScopeWrite, error) {
	out := make([]persistence.ScopeWrite, 0, len(ds))
	for _, d := range ds {
		cur := ""
		var prev int64
		found := false
		for i := range out {
			if out[i].Scope == d.Scope {
				cur, prev, found = out[i].State, out[i].Prev, true
			}
		}
		if !found {
			err := a.queryRow(`SELECT state_json FROM state_scopes WHERE scope = ?`, d.Scope).Scan(&cur)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, err
			}
			prev = int64(len(cur))
		}
		next, err := d.Apply(cur, a.quotas)
		if err != nil {
			return nil, err
		}
		out = append(out, persistence.ScopeWrite{Scope: d.Scope, State: next, Prev: prev})
	}
	return out, nil
}

// WriteScopes stores the states (persistence.ScopesDialect). A turn or
// a create checked their bytes with its own; UpdateScopes' are checked by
// persistence.CheckedScopes.
func (a *applier) WriteScopes(ws []persistence.ScopeWrite, at int64) error {
	for _, w := range ws {
		if _, err := a.exec(`INSERT INTO state_scopes (scope, state_json, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (scope) DO UPDATE SET state_json = excluded.state_json, updated_at = excluded.updated_at`,
			w.Scope, w.State, at); err != nil {
			return err
		}
	}
	persistence.BookScopes(a.usage, ws)
	return nil
}

// turnDeltas computes what turn t changes: the session's state after it
// (from state) and its scopes' states. Its error is the turn's own
// (persistence.IsCommandError tells a store failure apart).
func (a *applier) turnDeltas(sessionID, state string, t *persistence.Turn) (string, []persistence.ScopeWrite, error) {
	if t.State != nil {
		var err error
		if state, err = persistence.ApplyDelta("session "+sessionID, state, t.State); err != nil {
			return "", nil, err
		}
	}
	ws, err := a.ComputeScopes(t.Scopes)
	return state, ws, err
}
