package storetest

import (
	"math"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

var tokenCases = []testCase{
	{"token totals that would overflow are refused alike and store nothing", func(h *harness) {
		s := h.create()
		add := func(d *sessionv1.TokenUsage) persistence.Result {
			return h.apply(&persistence.UpdateSession{SessionID: s.SessionId, TokenDelta: d, UpdatedAt: h.now(),
				Audit: []*auditv1.AuditEntry{h.entry("token_usage_updated")}})[0]
		}
		full := &sessionv1.TokenUsage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64 - 1, Cost: math.MaxFloat64}
		if res := add(full); res.Err != nil {
			h.Fatalf("adding up to the maximum: %v", res.Err)
		}
		entries := len(h.scan())
		for _, d := range []*sessionv1.TokenUsage{
			{InputTokens: 1},
			{OutputTokens: 2},
			{OutputTokens: math.MaxInt64},
			{Cost: math.MaxFloat64},
			{InputTokens: 0, OutputTokens: 1, Cost: 1e300}, // the output fits, the cost does not
		} {
			res := add(d)
			wantCode(h.T, res.Err, errs.FailedPreconditionCode)
			// The same error from every store.
			if want := persistence.TokenOverflow(s.SessionId).Error(); res.Err.Error() != want {
				h.Fatalf("adding %v: %v, want %v", d, res.Err, want)
			}
		}
		if got := h.get(s.SessionId).GetTokenUsage(); !proto.Equal(got, full) {
			h.Fatalf("totals after refused updates: %v, want %v", got, full)
		}
		if n := len(h.scan()); n != entries {
			h.Fatalf("refused updates stored %d audit entries", n-entries)
		}
		// A full session still takes a zero delta, closes, lists and deletes.
		if res := add(&sessionv1.TokenUsage{OutputTokens: 1}); res.Err != nil {
			h.Fatalf("the last token that fits: %v", res.Err)
		}
		h.ok(&persistence.UpdateSession{SessionID: s.SessionId, State: sessionv1.SessionState_SESSION_STATE_CLOSED, ClosedAt: h.now(), TokenDelta: &sessionv1.TokenUsage{}})
		if l, err := h.r.ListSessions(h.ctx, persistence.SessionFilter{}); err != nil || len(l) != 1 || l[0].GetTokenUsage().GetOutputTokens() != math.MaxInt64 {
			h.Fatalf("ListSessions: %v, %v", l, err)
		}
		h.ok(&persistence.DeleteSession{SessionID: s.SessionId})
	}},
	{"a cost fits exactly when its float64 sum is finite", func(h *harness) {
		below := math.Nextafter(math.MaxFloat64, 0) // one ulp (2^971) below the maximum
		for _, c := range []struct {
			stored, delta float64
			fits          bool
		}{
			{math.MaxFloat64, math.Ldexp(1, 969), true}, // a quarter ulp: rounds back to the maximum
			{below, math.Ldexp(1, 970), true},           // half an ulp: ties to the even one below
			{below, math.Ldexp(3, 970), false},          // one and a half: ties to 2^1024, Infinity
			{math.MaxFloat64, math.Ldexp(1, 970), false},
		} {
			s := h.create()
			h.ok(&persistence.UpdateSession{SessionID: s.SessionId, TokenDelta: &sessionv1.TokenUsage{Cost: c.stored}})
			res := h.apply(&persistence.UpdateSession{SessionID: s.SessionId, TokenDelta: &sessionv1.TokenUsage{Cost: c.delta}})[0]
			want := c.stored + c.delta
			_, goErr := persistence.AddTokens(s.SessionId, &sessionv1.TokenUsage{Cost: c.stored}, &sessionv1.TokenUsage{Cost: c.delta})
			switch {
			case c.fits && (res.Err != nil || goErr != nil):
				h.Fatalf("%g + %g: store %v, AddTokens %v; want it to fit", c.stored, c.delta, res.Err, goErr)
			case !c.fits && (errs.CodeOf(res.Err) != errs.FailedPreconditionCode || goErr == nil):
				h.Fatalf("%g + %g: store %v, AddTokens %v; want TokenOverflow", c.stored, c.delta, res.Err, goErr)
			case !c.fits:
				want = c.stored
			}
			if got := h.get(s.SessionId).GetTokenUsage().GetCost(); got != want {
				h.Fatalf("%g + %g: stored %g, want %g", c.stored, c.delta, got, want)
			}
		}
	}},
	{"bad token deltas are INVALID_ARGUMENT; a missing session NOT_FOUND", func(h *harness) {
		s := h.create()
		for _, d := range []*sessionv1.TokenUsage{{InputTokens: -1}, {OutputTokens: -1}, {Cost: -1}, {Cost: math.NaN()}, {Cost: math.Inf(1)}} {
			h.fails(&persistence.UpdateSession{SessionID: s.SessionId, TokenDelta: d}, errs.InvalidArgumentCode)
		}
		h.fails(&persistence.UpdateSession{SessionID: ids.New(), TokenDelta: &sessionv1.TokenUsage{InputTokens: 1}}, errs.NotFoundCode)
		if got := h.get(s.SessionId).GetTokenUsage(); got.GetInputTokens() != 0 || got.GetOutputTokens() != 0 || got.GetCost() != 0 {
			h.Fatalf("totals after refused updates: %v", got)
		}
	}},
}
