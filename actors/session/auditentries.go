package session

import (
	"encoding/json"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/lifecycle"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// entry builds an audit entry about this session, caused by r: it names
// r's principal and the session's namespace (the owner has loaded the
// session whenever it builds one: an append is never blind with
// Config.AuditMessages).
func (o *owner) entry(r *lifecycle.Request, event, planID string, details map[string]any, now time.Time) (*auditv1.AuditEntry, error) {
	e, err := newEntry(event, o.id, o.sess.GetActorName(), planID, details, now)
	if err != nil {
		return nil, err
	}
	e.Principal, e.Namespace = r.Principal, o.sess.GetNamespace()
	return e, nil
}

// createdDetails is the session_created entry's details: a struct, not a
// map, because encoding/json marshals it with no map to build and no keys
// to sort (issue 17: every create pays it). Its fields are in key order,
// so the text is the one the map gave.
type createdDetails struct {
	Automation string `json:"automation"`
	Namespace  string `json:"namespace"`
}

// createdEntry is the session_created audit entry of c. Its details hold
// two strings under fixed keys, none a secret one: audit.NewOwnEntry
// stores them as given.
func createdEntry(r *lifecycle.Request, sessionID string, c *sessionv1.CreateSessionRequest, now time.Time) (*auditv1.AuditEntry, error) {
	b, err := json.Marshal(createdDetails{Automation: c.Automation, Namespace: c.Namespace})
	if err != nil {
		return nil, errs.Internal("audit details of %s: %v", audit.EventSessionCreated, err)
	}
	e, err := audit.NewOwnEntry(&auditv1.RecordRequest{EventType: audit.EventSessionCreated, SessionId: sessionID,
		ActorName: c.ActorName, DetailsJson: string(b)}, now)
	if err != nil {
		return nil, errs.Internal("audit entry %s: %v", audit.EventSessionCreated, err)
	}
	e.Principal, e.Namespace = r.Principal, c.Namespace
	return e, nil
}

func newEntry(event, sessionID, actorName, planID string, details map[string]any, now time.Time) (*auditv1.AuditEntry, error) {
	dj := "{}"
	if len(details) > 0 {
		b, err := json.Marshal(details)
		if err != nil {
			return nil, errs.Internal("audit details of %s: %v", event, err)
		}
		dj = string(b)
	}
	req := &auditv1.RecordRequest{
		EventType:   event,
		SessionId:   sessionID,
		PlanId:      planID,
		ActorName:   actorName,
		DetailsJson: dj,
	}
	build := audit.NewEntry
	if ownDetails(details) {
		build = audit.NewOwnEntry
	}
	e, err := build(req, now)
	if err != nil {
		return nil, errs.Internal("audit entry %s: %v", event, err)
	}
	return e, nil
}

// ownDetails reports whether details, marshaled by encoding/json, is what
// audit.NewOwnEntry takes as given: no key a secret one and every value a
// scalar (nothing nested that could hold one), so that normalizing and
// masking the text again would return it unchanged. A session's own
// events' details all are; skipping that second pass is part of what a
// create costs (issue 17).
func ownDetails(details map[string]any) bool {
	for k, v := range details {
		if audit.IsSecretKey(k) {
			return false
		}
		switch v.(type) {
		case string, bool, int, int32, int64, float64:
		default:
			return false
		}
	}
	return true
}
