package storetest

import (
	"math"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Stores keep times as int64 unix nanoseconds. These cases hold them to
// persistence's rule: a stored time is kept exactly or refused, a bound
// never is refused and means what it says.

var (
	// The first and last storable instants: the int64 ends stand for
	// "before/after every stored time" in bounds.
	firstStorable = time.Unix(0, math.MinInt64+1).UTC()
	lastStorable  = time.Unix(0, math.MaxInt64-1).UTC()
	y1600         = time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)
	y3000         = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// unstorable are timestamps no store can keep exactly: outside the
// nanosecond range (1600 wrapped to 2184 before), its two ends, the epoch
// (stored as 0, which reads back as unset) and protobuf-invalid ones.
func unstorable() map[string]*timestamppb.Timestamp {
	return map[string]*timestamppb.Timestamp{
		"1600":          timestamppb.New(y1600),
		"3000":          timestamppb.New(y3000),
		"year 1":        timestamppb.New(time.Time{}),
		"int64 min":     timestamppb.New(time.Unix(0, math.MinInt64)),
		"int64 max":     timestamppb.New(time.Unix(0, math.MaxInt64)),
		"epoch":         timestamppb.New(time.Unix(0, 0)),
		"nanos invalid": {Seconds: 100, Nanos: 1e9},
		"year 10000":    {Seconds: 253402300800},
	}
}

var timeCases = []testCase{
	{"stored times the store cannot keep are INVALID_ARGUMENT and store nothing", func(h *harness) {
		for name, bad := range unstorable() {
			m := h.msg("imported")
			m.CreatedAt = bad
			s := h.session()
			h.Logf("%s: import", name)
			h.fails(&persistence.CreateSession{Session: s, Messages: []*sessionv1.Message{h.msg("ok"), m}}, errs.InvalidArgumentCode)
			_, err := h.r.GetSession(h.ctx, s.SessionId)
			wantCode(h.T, err, errs.NotFoundCode)

			h.Logf("%s: session created_at", name)
			s = h.session(func(s *sessionv1.Session) { s.CreatedAt = bad })
			h.fails(&persistence.CreateSession{Session: s}, errs.InvalidArgumentCode)

			h.Logf("%s: append", name)
			live := h.create()
			m = h.msg("appended")
			m.CreatedAt = bad
			good := h.msg("good")
			res := h.appendOK(&persistence.AppendMessages{SessionID: live.SessionId, NextSequence: 0, UpdatedAt: h.now(),
				Turns: []persistence.Turn{turn(h.msg("same turn"), m), turn(good)}})
			wantCode(h.T, res.Turns[0].Err, errs.InvalidArgumentCode)
			checkTurn(h, res.Turns[1], live.SessionId, 0, []*sessionv1.Message{good})
			if ms := h.messages(live.SessionId); len(ms) != 1 || ms[0].MessageId != good.MessageId {
				h.Fatalf("%s: stored %v, want only the good turn", name, ms)
			}

			h.Logf("%s: plan record", name)
			r := h.record("p-"+live.SessionId, 0, planv1.Phase_PHASE_EXECUTE, planv1.ErrorCategory_ERROR_CATEGORY_TRANSIENT)
			r.RecordedAt = bad
			h.fails(&persistence.PlanWrite{PlanID: r.PlanId, Records: []*planv1.ErrorRecord{r}}, errs.InvalidArgumentCode)
			_, err = h.r.GetPlan(h.ctx, "", r.PlanId)
			wantCode(h.T, err, errs.NotFoundCode)

			h.Logf("%s: audit entry", name)
			before := len(h.scan())
			e := h.entry("a", func(e *auditv1.AuditEntry) { e.CreatedAt = bad })
			h.fails(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{h.entry("a"), e}}, errs.InvalidArgumentCode)
			if after := len(h.scan()); after != before {
				h.Fatalf("%s: %d audit entries stored by a refused record", name, after-before)
			}
		}
	}},
	{"the first and last storable times are kept exactly", func(h *harness) {
		for _, at := range []time.Time{firstStorable, lastStorable, time.Date(1678, 1, 1, 0, 0, 0, 1, time.UTC), time.Unix(0, 1)} {
			m := h.msg("edge")
			m.CreatedAt = timestamppb.New(at)
			s := h.create(m)
			if got := h.messages(s.SessionId)[0].GetCreatedAt().AsTime(); !got.Equal(at) {
				h.Fatalf("stored %v, read back %v", at, got)
			}
		}
	}},
	{"bounds far in the past or future mean exactly what they say", func(h *harness) {
		early := h.entry("a", func(e *auditv1.AuditEntry) { e.CreatedAt = timestamppb.New(firstStorable) })
		mid := h.entry("a")
		late := h.entry("a", func(e *auditv1.AuditEntry) { e.CreatedAt = timestamppb.New(lastStorable) })
		h.ok(&persistence.RecordAudit{Entries: []*auditv1.AuditEntry{early, mid, late}})
		ts := timestamppb.New
		for _, c := range []struct {
			name string
			f    *auditv1.Filter
			want int64
		}{
			{"since 1600", &auditv1.Filter{Since: ts(y1600)}, 3},
			{"since year 1", &auditv1.Filter{Since: ts(time.Time{})}, 3},
			{"since 3000", &auditv1.Filter{Since: ts(y3000)}, 0},
			{"until 3000", &auditv1.Filter{Until: ts(y3000)}, 3},
			{"until 1600", &auditv1.Filter{Until: ts(y1600)}, 0},
			{"until year 1", &auditv1.Filter{Until: ts(time.Time{})}, 0},
			{"1600 to 3000", &auditv1.Filter{Since: ts(y1600), Until: ts(y3000)}, 3},
			{"since the last storable", &auditv1.Filter{Since: ts(lastStorable)}, 1},
			{"until the last storable", &auditv1.Filter{Until: ts(lastStorable)}, 2},
			{"until the first storable", &auditv1.Filter{Until: ts(firstStorable)}, 0},
		} {
			if n, err := h.r.CountAudit(h.ctx, c.f); err != nil || n != c.want {
				h.Fatalf("CountAudit %s = %d, %v; want %d", c.name, n, err, c.want)
			}
			if es, err := h.r.ListAudit(h.ctx, c.f, "", 100); err != nil || int64(len(es)) != c.want {
				h.Fatalf("ListAudit %s: %d entries, %v; want %d", c.name, len(es), err, c.want)
			}
		}
		// A prune never removes an entry newer than its bound, and Go's
		// zero time is a bound (year 1), not "missing".
		for _, older := range []time.Time{y1600, {}, firstStorable} {
			if cmd := (&persistence.PruneAudit{OlderThan: older, Limit: 100}); cmd.ResultOf(h.ok(cmd)).Removed != 0 {
				h.Fatalf("prune older than %v removed some", older)
			}
		}
		if len(h.verifyChain()) != 3 {
			h.Fatal("a prune before every entry removed some")
		}
		cmd := &persistence.PruneAudit{OlderThan: y3000, Limit: 100}
		if n := cmd.ResultOf(h.ok(cmd)).Removed; n != 3 {
			h.Fatalf("prune older than 3000 removed %d, want 3", n)
		}
	}},
}
