package checker_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/tests/checker"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// world is a synthetic ledger together with the observation a correct node
// would give for it. Each test breaks the observation (or the ledger) in
// one way and expects Check to count exactly that.
type world struct {
	l     *checker.Ledger
	o     *checker.Observed
	sid   string
	turns []checker.Turn // acknowledged, in order
	plan  string
	event []string
}

// newWorld: one session with four acknowledged turns (sequences 0-1 and
// 2-3 for client 0, 4 for client 1, 5-6 for client 0), a replay, one plan
// with three records of unnamed requests (one extra attempt whose answer
// was lost) and one of a request named and retried, two
// synchronous audit entries, a verified chain.
func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{l: checker.NewLedger(), sid: ids.New(), plan: ids.New()}
	w.o = &checker.Observed{
		Sessions: map[string]*checker.SessionView{},
		Plans:    map[string][]*planv1.ErrorRecord{},
		Audit:    map[string]*auditv1.AuditEntry{},
		Chain:    &auditv1.VerifyResponse{Ok: true, EntriesChecked: 9},
	}
	w.l.SessionCreated(w.sid)
	view := &checker.SessionView{Session: &sessionv1.Session{SessionId: w.sid}}
	w.o.Sessions[w.sid] = view
	seq := int64(0)
	for i, spec := range []struct{ client, n int }{{0, 2}, {0, 2}, {1, 1}, {0, 2}} {
		turn := checker.Turn{Session: w.sid}
		resp := &sessionv1.AppendResponse{}
		for k := range spec.n {
			m := checker.Msg{ID: ids.New(), Role: sessionv1.Role_ROLE_USER, Content: fmt.Sprintf("turn %d msg %d", i, k)}
			turn.Messages = append(turn.Messages, m)
			resp.Messages = append(resp.Messages, &sessionv1.AppendedMessage{MessageId: m.ID, Sequence: seq})
			view.Messages = append(view.Messages, &sessionv1.Message{SessionId: w.sid, MessageId: m.ID, Sequence: seq, Role: m.Role, Content: m.Content})
			seq++
		}
		// The last turn's first answer was lost; its retry was answered as
		// a duplicate with the stored sequences.
		resp.Duplicate = i == 3
		w.l.AppendSent(turn)
		w.l.AppendAcked(spec.client, turn, false, resp)
		w.turns = append(w.turns, turn)
	}
	view.Session.MessageCount = seq
	w.replay(0, w.turns[0], true, 0)

	for i := range 4 {
		req := &planv1.RecordErrorRequest{PlanId: w.plan, Phase: planv1.Phase_PHASE_EXECUTE, StepId: "s", Message: fmt.Sprintf("e%d", i)}
		w.l.PlanErrorSent(req)
		if i == 3 {
			break // the fourth attempt's answer was lost, its record not stored
		}
		rec := &planv1.ErrorRecord{RecordId: ids.New(), PlanId: w.plan, Sequence: int64(i), Phase: req.Phase, StepId: "s", Message: req.Message}
		w.l.PlanErrorAcked(req, &planv1.RecordErrorResponse{Record: rec})
		w.o.Plans[checker.PlanRef("", w.plan)] = append(w.o.Plans[checker.PlanRef("", w.plan)], proto.Clone(rec).(*planv1.ErrorRecord))
	}
	// A named request sent three times (two answers lost), stored once,
	// its last retry answered with the original.
	named := &planv1.RecordErrorRequest{PlanId: w.plan, Phase: planv1.Phase_PHASE_EXECUTE, StepId: "s", Message: "e3", RecordId: ids.New()}
	for range 3 {
		w.l.PlanErrorSent(named)
	}
	rec := &planv1.ErrorRecord{RecordId: named.RecordId, PlanId: w.plan, Sequence: 3, Phase: named.Phase, StepId: "s", Message: named.Message}
	w.l.PlanErrorAcked(named, &planv1.RecordErrorResponse{Record: rec, Duplicate: true})
	w.o.Plans[checker.PlanRef("", w.plan)] = append(w.o.Plans[checker.PlanRef("", w.plan)], proto.Clone(rec).(*planv1.ErrorRecord))

	// Two synchronous audit records with client ids; the second was sent
	// twice (its first answer lost) and its retry answered as a duplicate.
	for i := range 2 {
		details := fmt.Sprintf(`{"op":%d}`, i)
		req := &auditv1.RecordRequest{EventId: ids.New(), EventType: "resource_modified", ActorName: "client-0", DetailsJson: details, Sync: true}
		e := &auditv1.AuditEntry{EventId: req.EventId, EventType: req.EventType, ActorName: req.ActorName, DetailsJson: details,
			Position: int64(5 + i), Hash: fmt.Sprintf("%064d", i+1), PrevHash: fmt.Sprintf("%064d", i)}
		w.l.AuditSent(req)
		if i == 1 {
			w.l.AuditSent(req)
		}
		if i == 1 {
			// Its first answer was lost with the connection (OUTCOME_UNKNOWN),
			// the second attempt found the node down (UNAVAILABLE).
			w.l.RetryAnswered("audit record "+req.EventId, []codes.Code{codes.DeadlineExceeded, codes.Unavailable}, true)
		}
		w.l.AuditAcked(req, &auditv1.RecordResponse{Entry: e, Durable: true, Duplicate: i == 1})
		w.o.Audit[e.EventId] = proto.Clone(e).(*auditv1.AuditEntry)
		w.o.AuditLog = append(w.o.AuditLog, proto.Clone(e).(*auditv1.AuditEntry))
		w.event = append(w.event, e.EventId)
	}
	return w
}

// replay records an acknowledged re-send of turn, answered from sequence
// first on.
func (w *world) replay(client int, turn checker.Turn, duplicate bool, first int64) {
	resp := &sessionv1.AppendResponse{Duplicate: duplicate}
	for k, m := range turn.Messages {
		resp.Messages = append(resp.Messages, &sessionv1.AppendedMessage{MessageId: m.ID, Sequence: first + int64(k)})
	}
	w.l.AppendAcked(client, turn, true, resp)
}

func (w *world) msgs() []*sessionv1.Message { return w.o.Sessions[w.sid].Messages }

func TestCheckCleanWorld(t *testing.T) {
	w := newWorld(t)
	r := checker.Check(w.l, w.o)
	if err := r.Err(); err != nil {
		t.Fatalf("a correct observation was judged wrong: %v", err)
	}
	want := checker.Report{Sessions: 1, AppendsAcked: 4, MessagesAcked: 7, Replays: 1, RetriedStored: 1, MessagesStored: 7,
		PlanErrorsAcked: 4, PlanRecords: 4, AuditAcked: 2, AuditRetriedStored: 1, AuditChecked: 9}
	if fmt.Sprint(r) != fmt.Sprint(want) {
		t.Fatalf("figures:\n got %+v\nwant %+v", r, want)
	}
}

// TestCheckDetects breaks one promise at a time; Check must count exactly
// that violation, so the checker is shown able to fail.
func TestCheckDetects(t *testing.T) {
	cases := []struct {
		name  string
		spoil func(w *world)
		field func(r *checker.Report) int
		want  int
	}{
		{"gap in sequences", func(w *world) {
			v := w.o.Sessions[w.sid]
			v.Messages = append(v.Messages[:3:3], v.Messages[4:]...) // drop sequence 3
			v.Session.MessageCount = 6
		}, gaps, 1},
		{"message_count disagrees", func(w *world) { w.o.Sessions[w.sid].Session.MessageCount = 8 }, gaps, 1},
		{"message id stored twice", func(w *world) {
			v := w.o.Sessions[w.sid]
			dup := proto.Clone(v.Messages[6]).(*sessionv1.Message)
			dup.Sequence = 7
			v.Messages = append(v.Messages, dup)
			v.Session.MessageCount = 8
		}, dupAppends, 1},
		{"sequence stored twice", func(w *world) {
			v := w.o.Sessions[w.sid]
			v.Messages[6].Sequence = 5 // the last message shares sequence 5
		}, dupAppends, 1},
		{"message content stored again under another id", func(w *world) {
			v := w.o.Sessions[w.sid]
			dup := proto.Clone(v.Messages[6]).(*sessionv1.Message)
			dup.Sequence, dup.MessageId = 7, ids.New()
			v.Messages = append(v.Messages, dup)
			v.Session.MessageCount = 8
		}, dupAppends, 1},
		{"acknowledged sequence changed", func(w *world) {
			m := w.msgs()
			m[1].Sequence, m[2].Sequence = 2, 1
			m[1], m[2] = m[2], m[1] // read order stays sequence order
		}, changed, 2},
		{"content changed", func(w *world) { w.msgs()[4].Content = "tampered" }, changed, 1},
		{"acknowledged message lost", func(w *world) {
			v := w.o.Sessions[w.sid]
			v.Messages = v.Messages[:6]
			v.Session.MessageCount = 6
		}, lost, 1},
		{"session lost", func(w *world) { delete(w.o.Sessions, w.sid) }, lost, 8},
		{"read order differs from sequence order", func(w *world) {
			m := w.msgs()
			m[0], m[1] = m[1], m[0]
		}, reordered, 1},
		{"client's later ack has an earlier sequence", func(w *world) {
			turn := checker.Turn{Session: w.sid, Messages: []checker.Msg{{ID: ids.New(), Role: sessionv1.Role_ROLE_USER, Content: "late"}}}
			w.l.AppendSent(turn)
			// Client 1 was acknowledged sequence 4 before; now 3.
			w.l.AppendAcked(1, turn, false, &sessionv1.AppendResponse{Messages: []*sessionv1.AppendedMessage{{MessageId: turn.Messages[0].ID, Sequence: 3}}})
			v := w.o.Sessions[w.sid]
			v.Messages = append(v.Messages, &sessionv1.Message{SessionId: w.sid, MessageId: turn.Messages[0].ID, Sequence: 7, Role: sessionv1.Role_ROLE_USER, Content: "late"})
			v.Session.MessageCount = 8
		}, reordered, 1},
		{"stored but never sent", func(w *world) {
			v := w.o.Sessions[w.sid]
			v.Messages = append(v.Messages, &sessionv1.Message{SessionId: w.sid, MessageId: ids.New(), Sequence: 7})
			v.Session.MessageCount = 8
		}, phantom, 1},
		{"replay answered with other sequences", func(w *world) { w.replay(0, w.turns[1], true, 4) }, changed, 2},
		{"replay not marked duplicate", func(w *world) { w.replay(0, w.turns[1], false, 2) }, badAcks, 1},
		{"turn acknowledged with non-consecutive sequences", func(w *world) {
			turn := checker.Turn{Session: w.sid, Messages: []checker.Msg{{ID: ids.New()}, {ID: ids.New()}}}
			w.l.AppendSent(turn)
			w.l.AppendAcked(2, turn, false, &sessionv1.AppendResponse{Messages: []*sessionv1.AppendedMessage{
				{MessageId: turn.Messages[0].ID, Sequence: 7}, {MessageId: turn.Messages[1].ID, Sequence: 9}}})
			v := w.o.Sessions[w.sid]
			for k, s := range []int64{7, 8} {
				v.Messages = append(v.Messages, &sessionv1.Message{SessionId: w.sid, MessageId: turn.Messages[k].ID, Sequence: s})
			}
			v.Session.MessageCount = 9
		}, badAcks, 1},
		{"plan record lost", func(w *world) {
			recs := w.o.Plans[checker.PlanRef("", w.plan)]
			w.o.Plans[checker.PlanRef("", w.plan)] = recs[:len(recs)-1]
		}, lost, 1},
		{"plan record sequence gap", func(w *world) {
			recs := w.o.Plans[checker.PlanRef("", w.plan)]
			w.o.Plans[checker.PlanRef("", w.plan)] = append(recs[:2:2], recs[3:]...)
		}, gaps, 1},
		{"plan record id stored twice", func(w *world) {
			recs := w.o.Plans[checker.PlanRef("", w.plan)]
			dup := proto.Clone(recs[2]).(*planv1.ErrorRecord)
			dup.Sequence = 3
			w.o.Plans[checker.PlanRef("", w.plan)] = append(recs, dup)
		}, dupPlanRecords, 1},
		{"more plan records than attempts", func(w *world) {
			recs := w.o.Plans[checker.PlanRef("", w.plan)]
			for s := int64(3); s < 6; s++ {
				recs = append(recs, &planv1.ErrorRecord{RecordId: ids.New(), PlanId: w.plan, Sequence: s})
			}
			w.o.Plans[checker.PlanRef("", w.plan)] = recs
		}, phantom, 2},
		{"plan record changed", func(w *world) { w.o.Plans[checker.PlanRef("", w.plan)][1].Message = "other" }, changed, 1},
		{"named plan request acknowledged with another record", func(w *world) {
			req := &planv1.RecordErrorRequest{PlanId: w.plan, Message: "e4", RecordId: ids.New()}
			w.l.PlanErrorSent(req)
			rec := &planv1.ErrorRecord{RecordId: ids.New(), PlanId: w.plan, Sequence: 4, Message: "e4"}
			w.l.PlanErrorAcked(req, &planv1.RecordErrorResponse{Record: rec})
			w.o.Plans[checker.PlanRef("", w.plan)] = append(w.o.Plans[checker.PlanRef("", w.plan)], proto.Clone(rec).(*planv1.ErrorRecord))
		}, badAcks, 1},
		{"plan records of named requests do not cover unnamed ones", func(w *world) {
			// A named request retried: its attempts cover its one
			// record, not the two unnamed ones stored besides, of
			// which the lost unnamed attempt covers one.
			named := &planv1.RecordErrorRequest{PlanId: w.plan, Message: "e4", RecordId: ids.New()}
			w.l.PlanErrorSent(named)
			w.l.PlanErrorSent(named)
			w.o.Plans[checker.PlanRef("", w.plan)] = append(w.o.Plans[checker.PlanRef("", w.plan)],
				&planv1.ErrorRecord{RecordId: named.RecordId, PlanId: w.plan, Sequence: 4, Message: "e4"},
				&planv1.ErrorRecord{RecordId: ids.New(), PlanId: w.plan, Sequence: 5},
				&planv1.ErrorRecord{RecordId: ids.New(), PlanId: w.plan, Sequence: 6})
		}, phantom, 1},
		{"audit event id stored twice", func(w *world) {
			dup := proto.Clone(w.o.AuditLog[1]).(*auditv1.AuditEntry)
			dup.Position = 7
			w.o.AuditLog = append(w.o.AuditLog, dup)
		}, dupAudit, 1},
		{"audit request stored again under another id", func(w *world) {
			// What a retry without a client id, told UNAVAILABLE after
			// its commit, stores.
			dup := proto.Clone(w.o.AuditLog[0]).(*auditv1.AuditEntry)
			dup.EventId, dup.Position = ids.New(), 7
			w.o.AuditLog = append(w.o.AuditLog, dup)
		}, dupAudit, 1},
		{"audit entry of an id never sent", func(w *world) {
			w.o.AuditLog = append(w.o.AuditLog, &auditv1.AuditEntry{EventId: ids.New(), EventType: "resource_modified",
				ActorName: "client-9", DetailsJson: `{"op":9}`, Position: 7})
		}, phantom, 1},
		{"retry stored already after nothing-stored answers", func(w *world) {
			w.l.RetryAnswered("audit record x", []codes.Code{codes.Unavailable, codes.ResourceExhausted}, true)
		}, falseUnavailable, 1},
		{"audit entry lost", func(w *world) { delete(w.o.Audit, w.event[1]) }, lost, 1},
		{"audit entry changed", func(w *world) { w.o.Audit[w.event[0]].Hash = strings.Repeat("f", 64) }, changed, 1},
		{"audit chain broken", func(w *world) {
			w.o.Chain = &auditv1.VerifyResponse{Ok: false, EntriesChecked: 3, FirstBrokenEventId: w.event[0], Reason: "hash mismatch"}
		}, chainBroken, 1},
		{"audit chain shorter than acknowledged", func(w *world) { w.o.Chain.EntriesChecked = 1 }, chainBroken, 1},
		{"synchronous audit answered before durable", func(w *world) {
			req := &auditv1.RecordRequest{EventType: "resource_modified", ActorName: "client-0", Sync: true}
			e := &auditv1.AuditEntry{EventId: ids.New(), EventType: req.EventType, ActorName: req.ActorName}
			w.l.AuditAcked(req, &auditv1.RecordResponse{Entry: e})
			w.o.Audit[e.EventId] = proto.Clone(e).(*auditv1.AuditEntry)
		}, badAcks, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.spoil(w)
			r := checker.Check(w.l, w.o)
			if got := tc.field(&r); got != tc.want {
				t.Errorf("counted %d, want %d; report: %s\n%s", got, tc.want, r.String(), strings.Join(r.Problems, "\n"))
			}
			err := r.Err()
			if !errors.Is(err, checker.ErrViolations) {
				t.Fatalf("Err() = %v, want ErrViolations", err)
			}
			if len(r.Problems) == 0 {
				t.Fatal("no problem described")
			}
		})
	}
}

func TestCheckProblemsAreBounded(t *testing.T) {
	w := newWorld(t)
	v := w.o.Sessions[w.sid]
	for s := int64(100); s < 200; s++ {
		v.Messages = append(v.Messages, &sessionv1.Message{SessionId: w.sid, MessageId: ids.New(), Sequence: s})
	}
	r := checker.Check(w.l, w.o)
	if r.Phantom != 100 || r.Gaps < 93 {
		t.Fatalf("phantom=%d gaps=%d, want 100 and >= 93", r.Phantom, r.Gaps)
	}
	if len(r.Problems) > 20 {
		t.Fatalf("%d problems kept, want at most 20", len(r.Problems))
	}
}

func gaps(r *checker.Report) int           { return r.Gaps }
func dupAppends(r *checker.Report) int     { return r.DupAppends }
func dupPlanRecords(r *checker.Report) int { return r.DupPlanRecords }
func dupAudit(r *checker.Report) int       { return r.DupAudit }
func falseUnavailable(r *checker.Report) int {
	return r.FalseUnavailable
}
func changed(r *checker.Report) int     { return r.Changed }
func lost(r *checker.Report) int        { return r.Lost }
func reordered(r *checker.Report) int   { return r.Reordered }
func phantom(r *checker.Report) int     { return r.Phantom }
func badAcks(r *checker.Report) int     { return r.BadAcks }
func chainBroken(r *checker.Report) int { return r.ChainBroken }

// twoTurns builds a session with turns x (client 0) and y (client 1), each
// of one message, stored as sequence xSeq and 1-xSeq; order says how their
// sends and answers interleave.
func twoTurns(t *testing.T, xSeq int64, order func(sendX, ackX, sendY, ackY func())) checker.Report {
	t.Helper()
	l := checker.NewLedger()
	sid := ids.New()
	l.SessionCreated(sid)
	x := checker.Turn{Session: sid, Messages: []checker.Msg{{ID: ids.New(), Content: "x"}}}
	y := checker.Turn{Session: sid, Messages: []checker.Msg{{ID: ids.New(), Content: "y"}}}
	ack := func(client int, turn checker.Turn, seq int64) func() {
		return func() {
			l.AppendAcked(client, turn, false, &sessionv1.AppendResponse{Messages: []*sessionv1.AppendedMessage{{MessageId: turn.Messages[0].ID, Sequence: seq}}})
		}
	}
	order(func() { l.AppendSent(x) }, ack(0, x, xSeq), func() { l.AppendSent(y) }, ack(1, y, 1-xSeq))
	msgs := []*sessionv1.Message{
		{SessionId: sid, MessageId: x.Messages[0].ID, Sequence: xSeq, Content: "x"},
		{SessionId: sid, MessageId: y.Messages[0].ID, Sequence: 1 - xSeq, Content: "y"},
	}
	if xSeq == 1 {
		msgs[0], msgs[1] = msgs[1], msgs[0]
	}
	o := &checker.Observed{
		Sessions: map[string]*checker.SessionView{sid: {Session: &sessionv1.Session{SessionId: sid, MessageCount: 2}, Messages: msgs}},
		Chain:    &auditv1.VerifyResponse{Ok: true},
	}
	return checker.Check(l, o)
}

// Two turns in flight at once may be committed in either order.
func TestCheckConcurrentTurnsEitherOrder(t *testing.T) {
	for _, xSeq := range []int64{0, 1} {
		r := twoTurns(t, xSeq, func(sendX, ackX, sendY, ackY func()) {
			sendX()
			sendY()
			ackY()
			ackX()
		})
		if err := r.Err(); err != nil {
			t.Errorf("x stored as %d: %v", xSeq, err)
		}
	}
}

// A turn sent after another turn's answer arrived must follow it, even
// from another client.
func TestCheckDetectsRealTimeReorder(t *testing.T) {
	r := twoTurns(t, 1, func(sendX, ackX, sendY, ackY func()) {
		sendX()
		ackX()
		sendY()
		ackY()
	})
	if r.Reordered != 1 || r.Violations() != 1 {
		t.Fatalf("reordered=%d violations=%d, want 1 and 1: %s", r.Reordered, r.Violations(), strings.Join(r.Problems, "\n"))
	}
}
