package session

import (
	"context"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// The façade's state, retention and expiry calls (issue 18). Session
// state and the snapshot slot belong to the session's actor like its
// messages; shared scopes belong to nobody but the writer, which applies
// their deltas in commit order.

func notYet(method string) error {
	return errs.FailedPrecondition("SessionService.%s is not implemented yet", method)
}

// UpdateState applies a state delta and scope deltas without messages: an
// append that carries no message.
func (s *Service) UpdateState(ctx context.Context, req *sessionv1.UpdateStateRequest) (*sessionv1.UpdateStateResponse, error) {
	return nil, notYet("UpdateState")
}

// GetState reads a session's state (as of its next sequence) and the
// shared scopes asked for, without reading messages.
func (s *Service) GetState(ctx context.Context, req *sessionv1.GetStateRequest) (*sessionv1.GetStateResponse, error) {
	return nil, notYet("GetState")
}

// Truncate removes the session's messages up to and including
// through_sequence; the next sequence never goes back.
func (s *Service) Truncate(ctx context.Context, req *sessionv1.TruncateRequest) (*sessionv1.TruncateResponse, error) {
	return nil, notYet("Truncate")
}

// PutSnapshot replaces the session's snapshot slot.
func (s *Service) PutSnapshot(ctx context.Context, req *sessionv1.PutSnapshotRequest) (*sessionv1.PutSnapshotResponse, error) {
	return nil, notYet("PutSnapshot")
}

// GetSnapshot returns the session's snapshot, unset when it has none.
func (s *Service) GetSnapshot(ctx context.Context, req *sessionv1.GetSnapshotRequest) (*sessionv1.GetSnapshotResponse, error) {
	return nil, notYet("GetSnapshot")
}

// DeleteSnapshot empties the snapshot slot if it covers no more than
// through_sequence.
func (s *Service) DeleteSnapshot(ctx context.Context, req *sessionv1.DeleteSnapshotRequest) (*sessionv1.DeleteSnapshotResponse, error) {
	return nil, notYet("DeleteSnapshot")
}

// SetExpiry sets or clears the session's expiry.
func (s *Service) SetExpiry(ctx context.Context, req *sessionv1.SetExpiryRequest) (*sessionv1.SetExpiryResponse, error) {
	return nil, notYet("SetExpiry")
}
