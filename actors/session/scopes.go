package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maxRequestIDBytes bounds UpdateScopesRequest.request_id.
const maxRequestIDBytes = 128

// UpdateScopes writes shared scopes without a session, in one command
// through the writer (persistence.UpdateScopes), audited scopes_updated.
// With a request id the entry's event id is derived from it (and the
// scopes' names), and its details carry the deltas' digest: a retry finds
// the entry and is a duplicate answering the scopes as they stand, for as
// long as the audit trail keeps the entry.
func (s *Service) UpdateScopes(ctx context.Context, req *sessionv1.UpdateScopesRequest) (*sessionv1.UpdateScopesResponse, error) {
	if err := checkRequestID(req.GetRequestId()); err != nil {
		return nil, err
	}
	_, ds, err := normalizeDeltas(nil, req.GetScopeDeltas())
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, errs.InvalidArgument("scope_deltas is empty (or changes nothing); give at least one delta")
	}
	now := time.Now().UTC()
	names := scopeNames(ds)
	digest := sha256.New()
	for _, d := range ds {
		b, err := json.Marshal(d.Delta) // map keys sorted: the same deltas, the same text
		if err != nil {
			return nil, errs.Internal("scope delta: %v", err)
		}
		digest.Write([]byte(d.Scope))
		digest.Write([]byte{0})
		digest.Write(b)
		digest.Write([]byte{0})
	}
	details := map[string]any{"scopes": names, "digest": hex.EncodeToString(digest.Sum(nil))}
	rec := &auditv1.RecordRequest{EventType: audit.EventScopesUpdated}
	if id := req.GetRequestId(); id != "" {
		details["request_id"] = id
		rec.EventId = requestEventID(id, names)
	}
	dj, err := json.Marshal(details)
	if err != nil {
		return nil, errs.Internal("audit details: %v", err)
	}
	rec.DetailsJson = string(dj)
	e, err := audit.NewOwnEntry(rec, now)
	if err != nil {
		return nil, err
	}
	cmd := &persistence.UpdateScopes{Scopes: ds, UpdatedAt: now, Audit: e, Retry: req.GetRequestId() != ""}
	res, err := s.wr.Apply(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return nil, err
	}
	out := cmd.ResultOf(res)
	if out.Duplicate {
		sc, err := s.env.reader.GetScopes(ctx, names)
		if err != nil {
			return nil, errs.From(err)
		}
		return &sessionv1.UpdateScopesResponse{Scopes: sc, Duplicate: true}, nil
	}
	resp := &sessionv1.UpdateScopesResponse{Scopes: make([]*sessionv1.ScopeState, len(out.Scopes))}
	for i, w := range out.Scopes {
		resp.Scopes[i] = &sessionv1.ScopeState{Scope: w.Scope, StateJson: w.State, UpdatedAt: timestamppb.New(now)}
	}
	return resp, nil
}

// scopeNames is each scope of ds once, in the order of its first delta.
func scopeNames(ds []persistence.ScopeDelta) []string {
	var out []string
	for _, d := range ds {
		if !slices.Contains(out, d.Scope) {
			out = append(out, d.Scope)
		}
	}
	return out
}

// requestEventID is the event id (a ULID) of the request id's entry: a
// hash of it and the scopes it writes, so requests of different scopes
// (tenants) that chose the same id do not meet.
func requestEventID(requestID string, scopes []string) string {
	h := sha256.New()
	h.Write([]byte("update-scopes\x00" + requestID))
	for _, s := range scopes {
		h.Write([]byte{0})
		h.Write([]byte(s))
	}
	var u ulid.ULID
	copy(u[:], h.Sum(nil))
	return u.String()
}

func checkRequestID(id string) error {
	if len(id) > maxRequestIDBytes {
		return errs.InvalidArgument("request_id is %d bytes; at most %d", len(id), maxRequestIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return errs.InvalidArgument("request_id holds a byte that is not printable ASCII at %d", i)
		}
	}
	return nil
}
