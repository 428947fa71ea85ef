package checker_test

import (
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/tests/checker"
)

// keyedWorld: a keyed session where batch 1 stored keys a (0) and b (1)
// and batch 2 stored c (2) and kept b; and the observation a correct node
// gives.
func keyedWorld() (*checker.Ledger, *checker.Observed, string) {
	l, sid := checker.NewLedger(), ids.New()
	l.KeyedSessionCreated(sid)
	msg := func(key string) *sessionv1.NewMessage {
		return &sessionv1.NewMessage{MessageId: ids.New(), ItemKey: key, OnKeyConflict: sessionv1.KeyConflict_KEY_CONFLICT_KEEP_STORED}
	}
	a, b, b2, c := msg("a"), msg("b"), msg("b"), msg("c")
	stored := []*sessionv1.Message{
		{MessageId: a.MessageId, ItemKey: "a", Sequence: 0},
		{MessageId: b.MessageId, ItemKey: "b", Sequence: 1},
		{MessageId: c.MessageId, ItemKey: "c", Sequence: 2},
	}
	for _, batch := range [][]*sessionv1.NewMessage{{a, b}, {c, b2}} {
		l.KeyedSent(sid, batch)
	}
	l.KeyedAcked(sid, []*sessionv1.NewMessage{a, b}, &sessionv1.AppendResponse{Messages: []*sessionv1.AppendedMessage{
		{MessageId: a.MessageId, Sequence: 0}, {MessageId: b.MessageId, Sequence: 1}}})
	l.KeyedAcked(sid, []*sessionv1.NewMessage{c, b2}, &sessionv1.AppendResponse{Messages: []*sessionv1.AppendedMessage{
		{MessageId: c.MessageId, Sequence: 2}, {MessageId: b.MessageId, Sequence: 1, Kept: true}}})
	return l, &checker.Observed{Keyed: map[string][]*sessionv1.Message{sid: stored}, Chain: &auditv1.VerifyResponse{Ok: true}}, sid
}

// Each way a node could break a keyed promise is counted as its violation.
func TestCheckKeyed(t *testing.T) {
	l, o, _ := keyedWorld()
	if r := checker.Check(l, o); r.Violations() != 0 || r.KeyedAcked != 2 || r.KeyedKept != 1 || r.KeyedStored != 3 {
		t.Fatalf("a correct node: %s\n%v", r.String(), r.Problems)
	}
	for name, c := range map[string]struct {
		breakIt func(ms []*sessionv1.Message) []*sessionv1.Message
		counter func(r *checker.Report) int
	}{
		"lost": {func(ms []*sessionv1.Message) []*sessionv1.Message { return ms[:2] }, func(r *checker.Report) int { return r.Lost }},
		"stored twice": {func(ms []*sessionv1.Message) []*sessionv1.Message {
			return append(ms, &sessionv1.Message{MessageId: ms[1].MessageId, ItemKey: "b", Sequence: 3})
		}, func(r *checker.Report) int { return r.DupAppends }},
		"kept one stored too (a sequence consumed)": {func(ms []*sessionv1.Message) []*sessionv1.Message {
			ms[2].Sequence = 3
			return ms
		}, func(r *checker.Report) int { return r.Gaps }},
		"another message under the key": {func(ms []*sessionv1.Message) []*sessionv1.Message {
			ms[1].MessageId = ids.New()
			return ms
		}, func(r *checker.Report) int { return r.Phantom }},
	} {
		l, o, sid := keyedWorld()
		o.Keyed[sid] = c.breakIt(o.Keyed[sid])
		if r := checker.Check(l, o); c.counter(&r) == 0 {
			t.Errorf("%s: not counted: %s\n%v", name, r.String(), r.Problems)
		}
	}
}
