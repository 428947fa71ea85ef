package postgres

import (
	"slices"

	"github.com/agentstate/agentstate/persistence"
)

// Shared scopes are read and rewritten inside the writer's transaction
// (persistence.ApplyDelta, as in the SQLite store). Members of a cluster
// have writers of their own that may change one scope at once, so a
// command first makes sure each of its scopes has a row and locks them,
// in name order (FOR UPDATE): writers take turns on a scope, and two
// commands of the same scopes cannot deadlock. (Commands of one batch lock
// in batch order; a deadlock between batches of two members is broken by
// the server and Apply runs the transaction again.) A turn's scopes are
// all computed before any is written, so a delta that fails fails its
// turn with nothing of it written.

func (a *applier) lockScopes(ds []persistence.ScopeDelta) (map[string]string, error) {
	names := make([]string, 0, len(ds))
	for _, d := range ds {
		names = append(names, d.Scope)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	out := make(map[string]string, len(names))
	for _, n := range names {
		tag, err := a.exec(`INSERT INTO state_scopes (scope, state_json, updated_at) VALUES ($1, '{}', 0)
			ON CONFLICT (scope) DO NOTHING`, n)
		if err != nil {
			return nil, err
		}
		// The row is stored (and counted) whatever becomes of the write.
		a.usage.AddScope(n, tag.RowsAffected()*int64(len(persistence.EmptyState)))
		var s string
		if err := a.queryRow(`SELECT state_json FROM state_scopes WHERE scope = $1 FOR UPDATE`, []any{n}, &s); err != nil {
			return nil, err
		}
		out[n] = s
	}
	return out, nil
}

// scopeStates computes the new states of ds. bad is a delta that does not
// apply (too large): the turn's own failure, with nothing written. err is
// a statement's failure, never the turn's, even when it is an *errs.Error:
// locking the scopes sends what the pipeline held, so in the attempt
// without savepoints err may be errPipeline, the failed check of an
// earlier turn or command (whose optimistic result is then wrong, so the
// batch must be replayed), or a statement that aborted the transaction; in
// a replay a failed statement has aborted the command's savepoint. Either
// way only failing the whole command (Isolate, or its savepoint's
// rollback) is right: as the turn's error, the earlier turn would be
// answered as stored where it is not, or later statements would run in the
// aborted transaction (SQLSTATE 25P02).
func (a *applier) scopeStates(ds []persistence.ScopeDelta) (ws []persistence.ScopeWrite, bad, err error) {
	if len(ds) == 0 {
		return nil, nil, nil
	}
	cur, err := a.lockScopes(ds)
	if err != nil {
		return nil, nil, err
	}
	prev := make(map[string]int64, len(cur))
	for sc, st := range cur {
		prev[sc] = int64(len(st))
	}
	out := make([]persistence.ScopeWrite, 0, len(ds))
	for _, d := range ds {
		next, err := d.Apply(cur[d.Scope], a.quotas)
		if err != nil {
			return nil, err, nil
		}
		cur[d.Scope] = next
		out = append(out, persistence.ScopeWrite{Scope: d.Scope, State: next, Prev: prev[d.Scope]})
	}
	return out, nil, nil
}

const updateScopeSQL = `UPDATE state_scopes SET state_json = $2, updated_at = $3 WHERE scope = $1`

// ComputeScopes is scopeStates for a command of its own
// (persistence.ScopesDialect), where a delta's failure fails the command.
func (a *applier) ComputeScopes(ds []persistence.ScopeDelta) ([]persistence.ScopeWrite, error) {
	ws, bad, err := a.scopeStates(ds)
	if err == nil {
		err = bad
	}
	return ws, err
}

// WriteScopes writes the states (rows locked by scopeStates): queued in
// the pipeline, or at once in a replay.
func (a *applier) WriteScopes(ws []persistence.ScopeWrite, at int64) error {
	for _, w := range ws {
		if a.buffered {
			a.queue(updateScopeSQL, w.Scope, w.State, at)
			continue
		}
		if _, err := a.exec(updateScopeSQL, w.Scope, w.State, at); err != nil {
			return err
		}
	}
	persistence.BookScopes(a.usage, ws)
	return nil
}

// turnDeltas computes what turn t changes: the session's state after it
// (from state; "" when t has no session delta) and its scopes' states.
// bad fails the turn alone; err fails its command (see scopeStates).
func (a *applier) turnDeltas(sessionID, state string, t *persistence.Turn) (after string, ws []persistence.ScopeWrite, bad, err error) {
	if t.State != nil {
		if after, bad = persistence.ApplyDelta("session "+sessionID, state, t.State); bad != nil {
			return "", nil, bad, nil
		}
	}
	ws, bad, err = a.scopeStates(t.Scopes)
	return after, ws, bad, err
}
