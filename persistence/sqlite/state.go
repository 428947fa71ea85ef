package sqlite

import (
	"context"
	"database/sql"
	"errors"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// Shared scopes are read and rewritten inside the writer's transaction, so
// their deltas apply in commit order whoever sends them. A turn's scopes
// are all computed before any is written: a delta that fails (too large)
// fails its turn with nothing of it written, also in an attempt without
// savepoints, which cannot undo a statement.

type scopeWrite struct {
	scope, state string
}

// scopeStates computes the new states of ds, reading each scope's stored
// one (or the one an earlier delta of ds produced).
func (a *applier) scopeStates(ds []persistence.ScopeDelta) ([]scopeWrite, error) {
	out := make([]scopeWrite, 0, len(ds))
	for _, d := range ds {
		cur := ""
		found := false
		for i := range out {
			if out[i].scope == d.Scope {
				cur, found = out[i].state, true
			}
		}
		if !found {
			err := a.queryRow(`SELECT state_json FROM state_scopes WHERE scope = ?`, d.Scope).Scan(&cur)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, err
			}
		}
		next, err := persistence.ApplyDelta("scope "+d.Scope, cur, d.Delta)
		if err != nil {
			return nil, err
		}
		out = append(out, scopeWrite{d.Scope, next})
	}
	return out, nil
}

func (a *applier) writeScopes(ws []scopeWrite, at int64) error {
	for _, w := range ws {
		if _, err := a.exec(`INSERT INTO state_scopes (scope, state_json, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (scope) DO UPDATE SET state_json = excluded.state_json, updated_at = excluded.updated_at`,
			w.scope, w.state, at); err != nil {
			return err
		}
	}
	return nil
}

// turnDeltas computes what turn t changes: the session's state after it
// (from state) and its scopes' states. Its error is the turn's own
// (persistence.IsCommandError tells a store failure apart).
func (a *applier) turnDeltas(sessionID, state string, t *persistence.Turn) (string, []scopeWrite, error) {
	if t.State != nil {
		var err error
		if state, err = persistence.ApplyDelta("session "+sessionID, state, t.State); err != nil {
			return "", nil, err
		}
	}
	ws, err := a.scopeStates(t.Scopes)
	return state, ws, err
}

func (r *reader) GetSessionState(ctx context.Context, sessionID string) (string, int64, error) {
	var state string
	var next int64
	err := r.db.QueryRowContext(ctx, `SELECT state_json, next_sequence FROM sessions WHERE session_id = ? AND state != ?`,
		sessionID, int64(persistence.SessionStateStaged)).Scan(&state, &next)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, errs.NotFound("session %s not found", sessionID)
	}
	if err != nil {
		return "", 0, storeErr("read session state", err)
	}
	return state, next, nil
}

func (r *reader) GetScopes(ctx context.Context, names []string) ([]*sessionv1.ScopeState, error) {
	out := make([]*sessionv1.ScopeState, len(names))
	for i, n := range names {
		s := &sessionv1.ScopeState{Scope: n, StateJson: persistence.EmptyState}
		var at int64
		err := r.db.QueryRowContext(ctx, `SELECT state_json, updated_at FROM state_scopes WHERE scope = ?`, n).Scan(&s.StateJson, &at)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, storeErr("read scopes", err)
		}
		if err == nil {
			s.UpdatedAt = persistence.Stamp(at)
		}
		out[i] = s
	}
	return out, nil
}
