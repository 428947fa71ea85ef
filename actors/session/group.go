package session

import (
	"context"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/directory"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// DeleteSessions deletes a namespace's sessions by client-key prefix in
// one command (persistence.DeleteSessions): the store selects the group
// inside its transaction and takes each session's owner epoch, so an
// owner that still holds one cannot write it afterwards; each is audited
// as a DeleteSession is (session_deleted, with reason "group"). The live
// owners of the deleted sessions are then passivated, so that none
// answers from what it held (a session created again under the same id
// is loaded afresh).
func (s *Service) DeleteSessions(ctx context.Context, req *sessionv1.DeleteSessionsRequest) (*sessionv1.DeleteSessionsResponse, error) {
	ns := req.GetNamespace()
	if ns == "" {
		ns = defaultNamespace
	}
	if err := checkText("namespace", ns, maxNameBytes); err != nil {
		return nil, err
	}
	if req.GetClientKeyPrefix() == "" {
		return nil, errs.InvalidArgument("client_key_prefix is required")
	}
	if err := checkText("client_key_prefix", req.GetClientKeyPrefix(), maxNameBytes); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	cmd := &persistence.DeleteSessions{Namespace: ns, ClientKeyPrefix: req.GetClientKeyPrefix(),
		Entry: func(m persistence.GroupMember) (*auditv1.AuditEntry, error) {
			return newEntry(audit.EventSessionDeleted, m.SessionID, m.ActorName, "",
				map[string]any{"messages": m.Messages, "reason": "group"}, now)
		}}
	res, err := s.wr.Apply(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return nil, err
	}
	g := cmd.ResultOf(res)
	if len(g.SessionIDs) > 0 {
		// Answered once the owners are withdrawn; the deletion itself
		// committed, so a failed wait only delays their passivation.
		_, _ = s.sys.Root.RequestFuture(s.pid, &directory.PassivateKeys{Keys: g.SessionIDs}, s.env.cfg.AskTimeout).Result()
	}
	return &sessionv1.DeleteSessionsResponse{SessionIds: g.SessionIDs, MessagesRemoved: g.MessagesRemoved}, nil
}
