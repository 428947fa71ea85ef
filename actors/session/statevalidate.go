package session

import (
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Validation of the issue-18 fields: state and scope deltas, client keys,
// client message ids, event times and expiry. Like validate.go it returns
// normal forms and typed INVALID_ARGUMENT errors.

const (
	maxClientIDBytes = 128
	// maxScopesPerWrite bounds the scope deltas of one request: each is
	// a read and a rewrite inside the writer's transaction.
	maxScopesPerWrite = 16
)

// checkMessageID accepts a ULID or a client's own id: 1-128 bytes of
// printable ASCII without spaces, which every framework id we know of
// (UUIDs, "event1") is, and which keeps ids printable in logs and exports.
func checkMessageID(id string) error {
	if ids.Check("message_id", id) == nil {
		return nil
	}
	if len(id) == 0 || len(id) > maxClientIDBytes {
		return errs.InvalidArgument("message_id %.40q must be a ULID or 1-%d bytes of printable ASCII", id, maxClientIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' {
			return errs.InvalidArgument("message_id %.40q must be a ULID or 1-%d bytes of printable ASCII without spaces", id, maxClientIDBytes)
		}
	}
	return nil
}

// normalizeDeltas validates a request's state delta and scope deltas.
func normalizeDeltas(state *sessionv1.StateDelta, scopes []*sessionv1.ScopeDelta) (*sessionv1.StateDelta, []persistence.ScopeDelta, error) {
	sd, err := persistence.NormalizeDelta("state_delta", state)
	if err != nil {
		return nil, nil, err
	}
	if len(scopes) > maxScopesPerWrite {
		return nil, nil, errs.InvalidArgument("scope_deltas has %d entries; at most %d", len(scopes), maxScopesPerWrite)
	}
	var out []persistence.ScopeDelta
	for i, s := range scopes {
		if err := persistence.CheckScope("scope_deltas[].scope", s.GetScope()); err != nil {
			return nil, nil, errs.InvalidArgument("scope_deltas[%d]: %s", i, errs.From(err).Msg)
		}
		d, err := persistence.NormalizeDelta("scope_deltas[].delta", s.GetDelta())
		if err != nil {
			return nil, nil, errs.InvalidArgument("scope_deltas[%d]: %s", i, errs.From(err).Msg)
		}
		if d != nil {
			out = append(out, persistence.ScopeDelta{Scope: s.GetScope(), Delta: d})
		}
	}
	return sd, out, nil
}

// toScopeDeltas is the wire form of normalized scope deltas.
func toScopeDeltas(ds []persistence.ScopeDelta) []*sessionv1.ScopeDelta {
	out := make([]*sessionv1.ScopeDelta, len(ds))
	for i, d := range ds {
		out[i] = &sessionv1.ScopeDelta{Scope: d.Scope, Delta: d.Delta}
	}
	return out
}

func fromScopeDeltas(ds []*sessionv1.ScopeDelta) []persistence.ScopeDelta {
	out := make([]persistence.ScopeDelta, len(ds))
	for i, d := range ds {
		out[i] = persistence.ScopeDelta{Scope: d.GetScope(), Delta: d.GetDelta()}
	}
	return out
}

func checkExpected(field string, v *int64) error {
	if v != nil && *v < 0 {
		return errs.InvalidArgument("%s %d is negative", field, *v)
	}
	return nil
}

// checkTime accepts an unset time or one the stores can keep.
func checkTime(field string, ts *timestamppb.Timestamp) error {
	if ts == nil {
		return nil
	}
	_, err := persistence.StoredNanos(field, ts)
	return err
}

// expiry turns expires_at or ttl (at most one) into the expiry time, from
// now; nil when neither is set.
func expiry(at *timestamppb.Timestamp, ttl *durationpb.Duration, now time.Time) (*timestamppb.Timestamp, error) {
	hasTTL := ttl != nil
	switch {
	case at != nil && hasTTL:
		return nil, errs.InvalidArgument("expires_at and ttl are both set; give one")
	case at != nil:
		if err := checkTime("expires_at", at); err != nil {
			return nil, err
		}
		return at, nil
	case hasTTL:
		d := ttl.AsDuration()
		if d <= 0 {
			return nil, errs.InvalidArgument("ttl %v is not positive", d)
		}
		t := timestamppb.New(now.Add(d))
		if err := checkTime("expires_at", t); err != nil {
			return nil, err
		}
		return t, nil
	}
	return nil, nil
}

// normalizeUpdateState validates UpdateState; it travels to the owner as
// is and is carried like an append without messages.
func normalizeUpdateState(req *sessionv1.UpdateStateRequest) (*sessionv1.UpdateStateRequest, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	sd, scopes, err := normalizeDeltas(req.GetStateDelta(), req.GetScopeDeltas())
	if err != nil {
		return nil, err
	}
	if sd == nil && len(scopes) == 0 {
		return nil, errs.InvalidArgument("UpdateState carries no change (a temp: key is never stored)")
	}
	if err := checkExpected("expected_next_sequence", req.ExpectedNextSequence); err != nil {
		return nil, err
	}
	return &sessionv1.UpdateStateRequest{SessionId: req.GetSessionId(), StateDelta: sd, ScopeDeltas: toScopeDeltas(scopes),
		ExpectedNextSequence: req.ExpectedNextSequence}, nil
}

// asAppend is the append a queued request carries: an AppendRequest, or
// an UpdateStateRequest as an append without messages.
func asAppend(msg any) (*sessionv1.AppendRequest, bool) {
	switch m := msg.(type) {
	case *sessionv1.AppendRequest:
		return m, true
	case *sessionv1.UpdateStateRequest:
		return &sessionv1.AppendRequest{SessionId: m.SessionId, StateDelta: m.StateDelta, ScopeDeltas: m.ScopeDeltas,
			ExpectedNextSequence: m.ExpectedNextSequence}, true
	}
	return nil, false
}

// timeBound is a time filter as the reader takes it: 0 when unset.
func timeBound(field string, ts *timestamppb.Timestamp) (int64, error) {
	if ts == nil {
		return 0, nil
	}
	if err := ts.CheckValid(); err != nil {
		return 0, errs.InvalidArgument("%s: %v", field, err)
	}
	n := persistence.BoundNanos(ts.AsTime())
	if n == 0 {
		// 0 means unbounded to the reader; no stored time is exactly the
		// epoch (persistence.StoredNanos refuses it), so 1 ns past it
		// selects the same messages.
		n = 1
	}
	return n, nil
}
