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
