package session

import (
	"context"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
)

// The façade's state, retention and expiry calls (issue 18). Session
// state and the snapshot slot belong to the session's actor like its
// messages: their writes go through it. Shared scopes belong to nobody but
// the writer, which applies their deltas in commit order. Reads go to the
// store: a session's state and next sequence are one row, read together,
// so GetState costs the same whatever the session's history.

// UpdateState applies a state delta and scope deltas without messages: an
// append that carries no message.
func (s *Service) UpdateState(ctx context.Context, req *sessionv1.UpdateStateRequest) (*sessionv1.UpdateStateResponse, error) {
	n, err := normalizeUpdateState(req)
	if err != nil {
		return nil, err
	}
	return routed[*sessionv1.UpdateStateResponse](ctx, s, n)
}

// GetState reads a session's state (as of its next sequence) and the
// shared scopes asked for, without reading messages.
func (s *Service) GetState(ctx context.Context, req *sessionv1.GetStateRequest) (*sessionv1.GetStateResponse, error) {
	return s.getState(ctx, req)
}

func (s *Service) getState(ctx context.Context, req *sessionv1.GetStateRequest) (*sessionv1.GetStateResponse, error) {
	if req.GetSessionId() == "" && len(req.GetScopes()) == 0 {
		return nil, errs.InvalidArgument("GetState names neither a session nor a scope")
	}
	if len(req.GetScopes()) > maxScopesPerRead {
		return nil, errs.InvalidArgument("scopes has %d entries; at most %d", len(req.GetScopes()), maxScopesPerRead)
	}
	for _, sc := range req.GetScopes() {
		if err := persistence.CheckScope("scopes[]", sc); err != nil {
			return nil, err
		}
	}
	out := &sessionv1.GetStateResponse{}
	if id := req.GetSessionId(); id != "" {
		if err := ids.Check("session_id", id); err != nil {
			return nil, err
		}
		state, next, err := s.env.reader.GetSessionState(ctx, id)
		if err != nil {
			return nil, errs.From(err)
		}
		out.StateJson, out.NextSequence = state, next
	}
	if len(req.GetScopes()) > 0 {
		sc, err := s.env.reader.GetScopes(ctx, req.GetScopes())
		if err != nil {
			return nil, errs.From(err)
		}
		out.Scopes = sc
	}
	return out, nil
}

// maxScopesPerRead bounds the scopes of one GetState.
const maxScopesPerRead = 64

// Truncate removes the session's messages up to and including
// through_sequence; the next sequence never goes back.
func (s *Service) Truncate(ctx context.Context, req *sessionv1.TruncateRequest) (*sessionv1.TruncateResponse, error) {
	n, err := normalizeTruncate(req)
	if err != nil {
		return nil, err
	}
	return routed[*sessionv1.TruncateResponse](ctx, s, n)
}

// PutSnapshot replaces the session's snapshot slot.
func (s *Service) PutSnapshot(ctx context.Context, req *sessionv1.PutSnapshotRequest) (*sessionv1.PutSnapshotResponse, error) {
	n, err := normalizePutSnapshot(req)
	if err != nil {
		return nil, err
	}
	return routed[*sessionv1.PutSnapshotResponse](ctx, s, n)
}

// GetSnapshot returns the session's snapshot, unset when it has none.
func (s *Service) GetSnapshot(ctx context.Context, req *sessionv1.GetSnapshotRequest) (*sessionv1.GetSnapshotResponse, error) {
	return s.getSnapshot(ctx, req)
}

func (s *Service) getSnapshot(ctx context.Context, req *sessionv1.GetSnapshotRequest) (*sessionv1.GetSnapshotResponse, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	if _, _, err := s.env.reader.GetSessionState(ctx, req.GetSessionId()); err != nil {
		return nil, errs.From(err)
	}
	snap, err := s.env.reader.GetSnapshot(ctx, req.GetSessionId())
	if err != nil {
		return nil, errs.From(err)
	}
	return &sessionv1.GetSnapshotResponse{Snapshot: snap}, nil
}

// DeleteSnapshot empties the snapshot slot if it covers no more than
// through_sequence.
func (s *Service) DeleteSnapshot(ctx context.Context, req *sessionv1.DeleteSnapshotRequest) (*sessionv1.DeleteSnapshotResponse, error) {
	n, err := normalizeDeleteSnapshot(req)
	if err != nil {
		return nil, err
	}
	return routed[*sessionv1.DeleteSnapshotResponse](ctx, s, n)
}

// SetExpiry sets or clears the session's expiry.
func (s *Service) SetExpiry(ctx context.Context, req *sessionv1.SetExpiryRequest) (*sessionv1.SetExpiryResponse, error) {
	n, err := normalizeSetExpiry(req)
	if err != nil {
		return nil, err
	}
	return routed[*sessionv1.SetExpiryResponse](ctx, s, n)
}

func normalizeTruncate(req *sessionv1.TruncateRequest) (*sessionv1.TruncateRequest, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	if req.GetThroughSequence() < 0 {
		return nil, errs.InvalidArgument("through_sequence %d is negative", req.GetThroughSequence())
	}
	return &sessionv1.TruncateRequest{SessionId: req.GetSessionId(), ThroughSequence: req.GetThroughSequence()}, nil
}

func normalizePutSnapshot(req *sessionv1.PutSnapshotRequest) (*sessionv1.PutSnapshotRequest, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	if req.GetSequence() < -1 {
		return nil, errs.InvalidArgument("sequence %d is below -1", req.GetSequence())
	}
	if len(req.GetData()) > persistence.MaxSnapshotBytes {
		return nil, errs.InvalidArgument("data is %d bytes; at most %d", len(req.GetData()), persistence.MaxSnapshotBytes)
	}
	return &sessionv1.PutSnapshotRequest{SessionId: req.GetSessionId(), Sequence: req.GetSequence(), Data: req.GetData()}, nil
}

func normalizeDeleteSnapshot(req *sessionv1.DeleteSnapshotRequest) (*sessionv1.DeleteSnapshotRequest, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	return &sessionv1.DeleteSnapshotRequest{SessionId: req.GetSessionId(), ThroughSequence: req.GetThroughSequence()}, nil
}

// normalizeSetExpiry turns a ttl into expires_at here, in the caller's
// goroutine: the owner stores a time, and a queued request does not age.
func normalizeSetExpiry(req *sessionv1.SetExpiryRequest) (*sessionv1.SetExpiryRequest, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	if req.GetClear() {
		if req.GetExpiresAt() != nil || req.GetTtl() != nil {
			return nil, errs.InvalidArgument("clear is set with expires_at or ttl; give one")
		}
		return &sessionv1.SetExpiryRequest{SessionId: req.GetSessionId(), Clear: true}, nil
	}
	at, err := expiry(req.GetExpiresAt(), req.GetTtl(), time.Now())
	if err != nil {
		return nil, err
	}
	if at == nil {
		return nil, errs.InvalidArgument("SetExpiry needs expires_at, ttl or clear")
	}
	return &sessionv1.SetExpiryRequest{SessionId: req.GetSessionId(), ExpiresAt: at}, nil
}

// expired reports whether a session's expiry has passed at now.
func expired(s *sessionv1.Session, now time.Time) bool {
	return s.GetExpiresAt() != nil && !s.GetExpiresAt().AsTime().After(now)
}
