package session

import (
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/lifecycle"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// startOne serves a request that is not an append: it is decided alone,
// in arrival order, with a write of its own when it changes anything.
func (o *owner) startOne(r *lifecycle.Request) {
	switch m := r.Msg.(type) {
	case *sessionv1.CreateSessionRequest:
		o.create(r, m)
	case *sessionv1.CloseSessionRequest:
		o.close(r)
	case *sessionv1.DeleteSessionRequest:
		if m.OnlyIfExpired && (o.sess == nil || !expired(o.sess, time.Now())) {
			// The sweep's delete loses to a SetExpiry that came first.
			o.reply(r, nil, errs.FailedPrecondition("session %s has not expired", o.id))
			return
		}
		o.delete(r)
	case *sessionv1.UpdateTokenUsageRequest:
		o.addTokens(r, m)
	case *sessionv1.LinkPlanRequest:
		o.link(r, m)
	case *sessionv1.TruncateRequest:
		o.truncate(r, m, 0)
	case *sessionv1.PutSnapshotRequest:
		o.putSnapshot(r, m)
	case *sessionv1.DeleteSnapshotRequest:
		o.deleteSnapshot(r, m)
	case *sessionv1.SetExpiryRequest:
		o.setExpiry(r, m)
	case *sessionv1.ReplaceSuffixRequest:
		o.replaceSuffix(r, m)
	default:
		o.reply(r, nil, errs.InvalidArgument("a session actor cannot serve %T", r.Msg))
	}
}

func sameSession(s *sessionv1.Session, c *sessionv1.CreateSessionRequest) bool {
	return s.GetActorName() == c.ActorName && s.GetNamespace() == c.Namespace &&
		s.GetAutomation() == c.Automation && s.GetMetadataJson() == c.MetadataJson &&
		s.GetClientKey() == c.ClientKey
}

func (o *owner) create(r *lifecycle.Request, c *sessionv1.CreateSessionRequest) {
	if o.sess != nil {
		if !sameSession(o.sess, c) {
			o.reply(r, nil, errs.AlreadyExists("session %s exists with other fields", o.id))
			return
		}
		o.reply(r, &sessionv1.CreateSessionResponse{Session: o.snapshot()}, nil)
		return
	}
	now := time.Now().UTC()
	ts := timestamppb.New(now)
	s := &sessionv1.Session{
		SessionId:    o.id,
		ActorName:    c.ActorName,
		Namespace:    c.Namespace,
		Automation:   c.Automation,
		MetadataJson: c.MetadataJson,
		State:        sessionv1.SessionState_SESSION_STATE_ACTIVE,
		TokenUsage:   &sessionv1.TokenUsage{},
		CreatedAt:    ts,
		UpdatedAt:    ts,
		ClientKey:    c.ClientKey,
		ExpiresAt:    c.ExpiresAt,
	}
	state, err := persistence.ApplyDelta("session "+o.id, "", c.StateDelta)
	if err != nil {
		o.reply(r, nil, err)
		return
	}
	e, err := createdEntry(o.id, c, now)
	if err != nil {
		o.reply(r, nil, err)
		return
	}
	cmd := &persistence.CreateSession{Epoch: o.epoch, Session: s, Audit: []*auditv1.AuditEntry{e},
		State: state, Scopes: fromScopeDeltas(c.ScopeDeltas)}
	o.submitOne(r, cmd, func(res persistence.Result) {
		if res.Err != nil {
			o.failed(res.Err)
			o.reply(r, nil, res.Err)
			return
		}
		o.sess, o.state = s, state
		o.reply(r, &sessionv1.CreateSessionResponse{Session: o.snapshot(), Created: true}, nil)
	})
}

func (o *owner) close(r *lifecycle.Request) {
	if o.sess == nil {
		o.reply(r, nil, o.notFound())
		return
	}
	if o.sess.GetState() == sessionv1.SessionState_SESSION_STATE_CLOSED {
		o.reply(r, &sessionv1.CloseSessionResponse{Session: o.snapshot()}, nil)
		return
	}
	now := time.Now().UTC()
	e, err := o.entry(audit.EventSessionClosed, "", nil, now)
	if err != nil {
		o.reply(r, nil, err)
		return
	}
	cmd := &persistence.UpdateSession{
		Epoch:     o.epoch,
		SessionID: o.id,
		State:     sessionv1.SessionState_SESSION_STATE_CLOSED,
		ClosedAt:  now,
		UpdatedAt: now,
		Audit:     []*auditv1.AuditEntry{e},
	}
	o.submitOne(r, cmd, func(res persistence.Result) {
		if res.Err != nil {
			o.failed(res.Err)
			o.reply(r, nil, res.Err)
			return
		}
		ts := timestamppb.New(now)
		o.sess.State, o.sess.ClosedAt, o.sess.UpdatedAt = sessionv1.SessionState_SESSION_STATE_CLOSED, ts, ts
		o.reply(r, &sessionv1.CloseSessionResponse{Session: o.snapshot()}, nil)
	})
}

func (o *owner) delete(r *lifecycle.Request) {
	if o.sess == nil {
		o.reply(r, nil, o.notFound())
		return
	}
	details := map[string]any{"messages": o.sess.GetMessageCount()}
	if m, ok := r.Msg.(*sessionv1.DeleteSessionRequest); ok && m.OnlyIfExpired {
		details["reason"] = "expired"
	}
	e, err := o.entry(audit.EventSessionDeleted, "", details, time.Now().UTC())
	if err != nil {
		o.reply(r, nil, err)
		return
	}
	cmd := &persistence.DeleteSession{Epoch: o.epoch, SessionID: o.id, Audit: []*auditv1.AuditEntry{e}}
	o.submitOne(r, cmd, func(res persistence.Result) {
		if res.Err != nil {
			o.failed(res.Err)
			o.reply(r, nil, res.Err)
			return
		}
		o.sess = nil
		d := cmd.ResultOf(res)
		o.reply(r, &sessionv1.DeleteSessionResponse{MessagesRemoved: d.MessagesRemoved, PlansOrphaned: d.PlansOrphaned}, nil)
	})
}

func (o *owner) addTokens(r *lifecycle.Request, m *sessionv1.UpdateTokenUsageRequest) {
	if o.sess == nil {
		o.reply(r, nil, o.notFound())
		return
	}
	now := time.Now().UTC()
	delta := &sessionv1.TokenUsage{InputTokens: m.GetInputTokens(), OutputTokens: m.GetOutputTokens(), Cost: m.GetCost()}
	// Totals that would overflow are refused before any write; the store
	// refuses them too (the same error), from what it holds.
	total, err := persistence.AddTokens(o.id, o.sess.GetTokenUsage(), delta)
	if err != nil {
		o.reply(r, nil, err)
		return
	}
	e, err := o.entry(audit.EventTokenUsageUpdated, "", map[string]any{
		"input_tokens": delta.InputTokens, "output_tokens": delta.OutputTokens, "cost": delta.Cost,
	}, now)
	if err != nil {
		o.reply(r, nil, err)
		return
	}
	cmd := &persistence.UpdateSession{Epoch: o.epoch, SessionID: o.id, TokenDelta: delta, UpdatedAt: now, Audit: []*auditv1.AuditEntry{e}}
	o.submitOne(r, cmd, func(res persistence.Result) {
		if res.Err != nil {
			o.failed(res.Err)
			o.reply(r, nil, res.Err)
			return
		}
		o.sess.TokenUsage = total
		o.sess.UpdatedAt = timestamppb.New(now)
		o.reply(r, &sessionv1.UpdateTokenUsageResponse{Total: &sessionv1.TokenUsage{
			InputTokens: total.InputTokens, OutputTokens: total.OutputTokens, Cost: total.Cost,
		}}, nil)
	})
}

func (o *owner) link(r *lifecycle.Request, m *sessionv1.LinkPlanRequest) {
	if o.sess == nil {
		o.reply(r, nil, o.notFound())
		return
	}
	now := time.Now().UTC()
	p := m.GetPlan()
	e, err := o.entry(audit.EventPlanLinked, p.GetPlanId(), map[string]any{"phase": p.GetPhase(), "state": p.GetState()}, now)
	if err != nil {
		o.reply(r, nil, err)
		return
	}
	cmd := &persistence.UpdateSession{Epoch: o.epoch, SessionID: o.id, LinkPlan: p, UpdatedAt: now, Audit: []*auditv1.AuditEntry{e}}
	o.submitOne(r, cmd, func(res persistence.Result) {
		if res.Err != nil {
			o.failed(res.Err)
			o.reply(r, nil, res.Err)
			return
		}
		o.sess.LinkedPlans = withLink(o.sess.LinkedPlans, p)
		o.sess.UpdatedAt = timestamppb.New(now)
		o.reply(r, &sessionv1.LinkPlanResponse{Session: o.snapshot()}, nil)
	})
}

// withLink replaces the link with p's plan id, or adds p.
func withLink(links []*sessionv1.LinkedPlan, p *sessionv1.LinkedPlan) []*sessionv1.LinkedPlan {
	for i, l := range links {
		if l.GetPlanId() == p.GetPlanId() {
			links[i] = p
			return links
		}
	}
	return append(links, p)
}
