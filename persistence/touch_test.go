package persistence_test

import (
	"fmt"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence"
)

// Every command names what it writes, and an activation names what it
// carries: the feed hub wakes a cold owner's tails from that (issue 27).
func TestTouchesNameWhatACommandWrites(t *testing.T) {
	e := []*auditv1.AuditEntry{{EventId: "e"}}
	app := &persistence.AppendMessages{SessionID: "s", Turns: []persistence.Turn{{}, {Audit: e}}}
	create := &persistence.CreateSession{Session: &sessionv1.Session{SessionId: "n"}}
	rec := &persistence.RecordAudit{Entries: e}
	cases := []struct {
		cmd  persistence.Command
		want persistence.Touch
	}{
		{&persistence.Activate{Kind: persistence.OwnerSession, ID: "s"}, persistence.Touch{}},
		{&persistence.Activate{Kind: persistence.OwnerSession, ID: "s", Then: app},
			persistence.Touch{Session: "s", Audit: persistence.AuditAppends}},
		{&persistence.Activate{Kind: persistence.OwnerSession, ID: "n", Then: create}, persistence.Touch{Session: "n"}},
		// A wrapped record is not stand-alone: no writer may merge it
		// away from its wrapper.
		{&persistence.Activate{Then: rec}, persistence.Touch{Audit: persistence.AuditAppends}},
		{app, persistence.Touch{Session: "s", Audit: persistence.AuditAppends}},
		{&persistence.AppendMessages{SessionID: "s", Turns: []persistence.Turn{{}}}, persistence.Touch{Session: "s"}},
		{create, persistence.Touch{Session: "n"}},
		{&persistence.UpdateSession{SessionID: "s", Audit: e}, persistence.Touch{Session: "s", Audit: persistence.AuditAppends}},
		{&persistence.DeleteSession{SessionID: "s"}, persistence.Touch{Session: "s"}},
		{&persistence.TruncateSession{SessionID: "s", Audit: e}, persistence.Touch{Session: "s", Audit: persistence.AuditAppends}},
		{&persistence.PutSnapshot{SessionID: "s"}, persistence.Touch{Session: "s"}},
		{&persistence.ReplaceSuffix{SessionID: "s", Audit: e}, persistence.Touch{Session: "s", Audit: persistence.AuditAppends}},
		{&persistence.ReplaceSuffix{SessionID: "s"}, persistence.Touch{Session: "s"}},
		{&persistence.PlanWrite{PlanID: "p", Audit: e}, persistence.Touch{Plan: "p", Audit: persistence.AuditAppends}},
		{&persistence.PlanWrite{PlanID: "p"}, persistence.Touch{Plan: "p"}},
		{rec, persistence.Touch{Audit: persistence.AuditRecords, Records: e}},
		{&persistence.RecordClientAudit{Entries: e}, persistence.Touch{Audit: persistence.AuditClientRecords, Records: e}},
		{&persistence.PruneAudit{}, persistence.Touch{Audit: persistence.AuditPrunes}},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d %T", i, c.cmd), func(t *testing.T) {
			got := c.cmd.Touches()
			if got.Session != c.want.Session || got.Plan != c.want.Plan || got.Audit != c.want.Audit ||
				len(got.Records) != len(c.want.Records) {
				t.Fatalf("Touches %+v, want %+v", got, c.want)
			}
			if got.WritesAudit() != (c.want.Audit != persistence.AuditNone) {
				t.Fatalf("WritesAudit %v for %v", got.WritesAudit(), got.Audit)
			}
		})
	}
}

// A store lays out, pools and locks a batch by what each command says: the
// rows it inserts, what its own statements check, the key it activates. A
// wrapped write's rows count, but it is checked before, as its activation.
func TestTouchesSayRowsChecksAndActivation(t *testing.T) {
	msgs := []*sessionv1.Message{{MessageId: "a"}, {MessageId: "b"}}
	app := &persistence.AppendMessages{SessionID: "s", Turns: []persistence.Turn{{Messages: msgs}, {}, {Messages: msgs[:1]}}}
	create := &persistence.CreateSession{Session: &sessionv1.Session{SessionId: "n"}, Messages: msgs}
	session := persistence.Fence{Kind: persistence.OwnerSession, ID: "s"}
	cases := []struct {
		cmd       persistence.Command
		messages  int
		check     persistence.FenceCheck
		activates persistence.Fence
	}{
		{app, 3, persistence.CheckAtAdvance, persistence.Fence{}},
		{&persistence.Activate{Kind: persistence.OwnerSession, ID: "s", Then: app}, 3, persistence.CheckBefore, session},
		{&persistence.Activate{Kind: persistence.OwnerSession, ID: "s"}, 0, persistence.CheckBefore, session},
		{create, 2, persistence.CheckBefore, persistence.Fence{}},
		{&persistence.Activate{Kind: persistence.OwnerSession, ID: "n", Then: create}, 2, persistence.CheckBefore,
			persistence.Fence{Kind: persistence.OwnerSession, ID: "n"}},
		{&persistence.PlanWrite{PlanID: "p"}, 0, persistence.CheckOwnerRow, persistence.Fence{}},
		{&persistence.UpdateSession{SessionID: "s"}, 0, persistence.CheckBefore, persistence.Fence{}},
		{&persistence.RecordAudit{}, 0, persistence.CheckBefore, persistence.Fence{}},
	}
	for i, c := range cases {
		got := c.cmd.Touches()
		if got.Messages != c.messages || got.Check != c.check || got.Activates != c.activates {
			t.Errorf("%d %T: messages %d, check %d, activates %+v; want %d, %d, %+v",
				i, c.cmd, got.Messages, got.Check, got.Activates, c.messages, c.check, c.activates)
		}
	}
}
