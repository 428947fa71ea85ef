package persistence

import (
	"math"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// Token totals are sums of caller-supplied deltas, so they can overflow:
// int64 for the token counts, a finite float64 for the cost. SQLite turns
// an overflowing integer sum into a REAL that no int64 column reads back;
// PostgreSQL raises its own error. Both stores refuse such an update the
// same way (TokenOverflow, inside the writer's transaction) and store
// nothing, and the session actor refuses it before writing (AddTokens).

// MaxTokenTotal and MaxCostTotal are the largest totals a session can hold.
const (
	MaxTokenTotal = math.MaxInt64
	MaxCostTotal  = math.MaxFloat64
)

// TokenOverflow is the refusal of a token usage update whose totals would
// not fit. It is FAILED_PRECONDITION on purpose: the delta is valid on its
// own (INVALID_ARGUMENT would say the request is wrong wherever it is
// sent), and it fails only because of the session's current totals, which
// a retry does not change (so not UNAVAILABLE or RESOURCE_EXHAUSTED, which
// invite retrying).
func TokenOverflow(sessionID string) error {
	return errs.FailedPrecondition("session %s: token usage totals would overflow (tokens at most %d, cost at most %g); nothing was added",
		sessionID, int64(MaxTokenTotal), MaxCostTotal)
}

// CheckTokenDelta refuses a delta no session can add: negative counts or
// a negative or non-finite cost.
func CheckTokenDelta(d *sessionv1.TokenUsage) error {
	if d.GetInputTokens() < 0 || d.GetOutputTokens() < 0 {
		return errs.InvalidArgument("token deltas must not be negative (input %d, output %d)", d.GetInputTokens(), d.GetOutputTokens())
	}
	if c := d.GetCost(); c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
		return errs.InvalidArgument("cost delta %v must be a finite number >= 0", c)
	}
	return nil
}

// AddTokens returns total + d, or TokenOverflow when a sum would not fit.
// d must have passed CheckTokenDelta.
//
// The stores check the same in SQL: counts as "total <= MaxTokenTotal - d"
// (d >= 0, so nothing overflows), the cost as "cost / 2 + d / 2 <=
// MaxCostTotal / 2". Halving is exact, so the halved sum rounds to exactly
// half the float64 sum, and it is at most MaxCostTotal / 2 exactly when the
// float64 sum is finite, which is what AddTokens checks. Unlike
// "cost + d", it cannot raise PostgreSQL's float overflow error, and both
// databases compute it alike.
func AddTokens(sessionID string, total, d *sessionv1.TokenUsage) (*sessionv1.TokenUsage, error) {
	in, out, cost := total.GetInputTokens(), total.GetOutputTokens(), total.GetCost()
	if in > MaxTokenTotal-d.GetInputTokens() || out > MaxTokenTotal-d.GetOutputTokens() {
		return nil, TokenOverflow(sessionID)
	}
	sum := cost + d.GetCost()
	if math.IsInf(sum, 0) || math.IsNaN(sum) {
		return nil, TokenOverflow(sessionID)
	}
	return &sessionv1.TokenUsage{InputTokens: in + d.GetInputTokens(), OutputTokens: out + d.GetOutputTokens(), Cost: sum}, nil
}

// ReadableCost is how a reader returns a stored cost: a non-finite one
// (a row written before overflowing updates were refused) is clamped, so
// that the session still reads, exports and deletes.
func ReadableCost(c float64) float64 {
	switch {
	case math.IsNaN(c):
		return 0
	case math.IsInf(c, 1):
		return MaxCostTotal
	case math.IsInf(c, -1):
		return -MaxCostTotal
	}
	return c
}
