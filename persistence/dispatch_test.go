package persistence_test

import (
	"fmt"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// recorder is a Handler that records which method Dispatch called.
type recorder struct{ got string }

func (r *recorder) hit(name string) (persistence.Result, error) {
	r.got = name
	return persistence.Result{}, nil
}

func (r *recorder) Activate(*persistence.Activate) (persistence.Result, error) {
	return r.hit("Activate")
}
func (r *recorder) CreateSession(*persistence.CreateSession) (persistence.Result, error) {
	return r.hit("CreateSession")
}
func (r *recorder) AppendMessages(*persistence.AppendMessages) (persistence.Result, error) {
	return r.hit("AppendMessages")
}
func (r *recorder) UpdateSession(*persistence.UpdateSession) (persistence.Result, error) {
	return r.hit("UpdateSession")
}
func (r *recorder) DeleteSession(*persistence.DeleteSession) (persistence.Result, error) {
	return r.hit("DeleteSession")
}
func (r *recorder) PlanWrite(*persistence.PlanWrite) (persistence.Result, error) {
	return r.hit("PlanWrite")
}
func (r *recorder) RecordAudit(*persistence.RecordAudit) (persistence.Result, error) {
	return r.hit("RecordAudit")
}
func (r *recorder) RecordClientAudit(*persistence.RecordClientAudit) (persistence.Result, error) {
	return r.hit("RecordClientAudit")
}
func (r *recorder) PruneAudit(*persistence.PruneAudit) (persistence.Result, error) {
	return r.hit("PruneAudit")
}
func (r *recorder) TruncateSession(*persistence.TruncateSession) (persistence.Result, error) {
	return r.hit("TruncateSession")
}
func (r *recorder) PutSnapshot(*persistence.PutSnapshot) (persistence.Result, error) {
	return r.hit("PutSnapshot")
}
func (r *recorder) ReplaceSuffix(*persistence.ReplaceSuffix) (persistence.Result, error) {
	return r.hit("ReplaceSuffix")
}
func (r *recorder) DeleteSessions(*persistence.DeleteSessions) (persistence.Result, error) {
	return r.hit("DeleteSessions")
}
func (r *recorder) UpdateScopes(*persistence.UpdateScopes) (persistence.Result, error) {
	return r.hit("UpdateScopes")
}

func TestDispatchCallsEachCommandsMethod(t *testing.T) {
	e := []*auditv1.AuditEntry{{EventId: "e"}}
	cases := []struct {
		cmd         persistence.Command
		method      string
		fence       persistence.Fence
		writesAudit bool
	}{
		{&persistence.Activate{Kind: persistence.OwnerSession, ID: "s"}, "Activate", persistence.Fence{}, false},
		{&persistence.CreateSession{Epoch: 3, Session: &sessionv1.Session{SessionId: "s"}, Audit: e}, "CreateSession",
			persistence.Fence{Kind: persistence.OwnerSession, ID: "s", Epoch: 3}, true},
		{&persistence.AppendMessages{Epoch: 4, SessionID: "s", Turns: []persistence.Turn{{}, {Audit: e}}}, "AppendMessages",
			persistence.Fence{Kind: persistence.OwnerSession, ID: "s", Epoch: 4}, true},
		{&persistence.AppendMessages{SessionID: "s", Turns: []persistence.Turn{{}}}, "AppendMessages",
			persistence.Fence{Kind: persistence.OwnerSession, ID: "s"}, false},
		{&persistence.UpdateSession{Epoch: 5, SessionID: "s"}, "UpdateSession",
			persistence.Fence{Kind: persistence.OwnerSession, ID: "s", Epoch: 5}, false},
		{&persistence.DeleteSession{SessionID: "s", Audit: e}, "DeleteSession",
			persistence.Fence{Kind: persistence.OwnerSession, ID: "s"}, true},
		{&persistence.PlanWrite{Epoch: 6, PlanID: "p"}, "PlanWrite",
			persistence.Fence{Kind: persistence.OwnerPlan, ID: "p", Epoch: 6}, false},
		{&persistence.RecordAudit{Entries: e}, "RecordAudit", persistence.Fence{}, true},
		{&persistence.RecordClientAudit{Entries: e}, "RecordClientAudit", persistence.Fence{}, true},
		{&persistence.PruneAudit{}, "PruneAudit", persistence.Fence{}, true},
		{&persistence.TruncateSession{Epoch: 7, SessionID: "s", Audit: e}, "TruncateSession",
			persistence.Fence{Kind: persistence.OwnerSession, ID: "s", Epoch: 7}, true},
		{&persistence.PutSnapshot{Epoch: 8, SessionID: "s"}, "PutSnapshot",
			persistence.Fence{Kind: persistence.OwnerSession, ID: "s", Epoch: 8}, false},
		{&persistence.DeleteSessions{Namespace: "n"}, "DeleteSessions", persistence.Fence{}, true},
		{&persistence.UpdateScopes{}, "UpdateScopes", persistence.Fence{}, true},
		{&persistence.ReplaceSuffix{Epoch: 9, SessionID: "s", Audit: e}, "ReplaceSuffix",
			persistence.Fence{Kind: persistence.OwnerSession, ID: "s", Epoch: 9}, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%T", c.cmd), func(t *testing.T) {
			var r recorder
			if _, err := persistence.Dispatch(&r, c.cmd); err != nil || r.got != c.method {
				t.Fatalf("Dispatch called %q (%v), want %q", r.got, err, c.method)
			}
			if f := c.cmd.Fence(); f != c.fence {
				t.Errorf("Fence %+v, want %+v", f, c.fence)
			}
			if w := c.cmd.Touches().WritesAudit(); w != c.writesAudit {
				t.Errorf("WritesAudit %v, want %v", w, c.writesAudit)
			}
		})
	}
	var r recorder
	if _, err := persistence.Dispatch(&r, nil); errs.CodeOf(err) != errs.InvalidArgumentCode || r.got != "" {
		t.Fatalf("nil command: %v, called %q", err, r.got)
	}
}
