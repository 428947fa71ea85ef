package session

import (
	"encoding/json"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/lifecycle"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The writes of a session actor. Each start* builds one command from the
// committed state, submits it, and leaves the state alone until the result
// arrives: memory changes only in the finish functions, and only for what
// committed.

// startAppends builds a run of appends: the leading queued appends the
// kernel coalesced, in arrival order, become one AppendMessages, one Turn
// per request. A warm owner decides it (persistence's
// AppendMessages.DecideSequence, the one place a session's next sequence is
// decided) on the head it holds: the committed next sequence
// (sess.MessageCount) and state; the store commits the turns densely from
// there or refuses the command whole. A cold owner's run goes blind
// (startBlind), decided by the same function on the head the store reads.
// Requests refused here (the session is closed, a conditional append's
// expectation is not the next sequence, a turn that cannot be built) are
// answered at once and carried by no write.
func (o *owner) startAppends(run []*lifecycle.Request) {
	now := time.Now().UTC()
	ts := timestamppb.New(now)
	if o.epoch == 0 && !o.loaded {
		o.startBlind(run, ts, now)
		return
	}
	carried, turns := o.turns(run, ts, now, func(a *sessionv1.AppendRequest) error {
		if err := o.appendable(); err != nil {
			return err
		}
		if a.ExpectedNextSequence != nil && *a.ExpectedNextSequence != o.sess.MessageCount {
			return &persistence.SequenceMismatchError{SessionID: o.id, Expected: *a.ExpectedNextSequence, Next: o.sess.MessageCount}
		}
		return nil
	})
	if len(carried) == 0 {
		return
	}
	cmd := &persistence.AppendMessages{Epoch: o.epoch, SessionID: o.id, Turns: turns, UpdatedAt: now}
	cmd.DecideSequence(persistence.SessionHead{NextSequence: o.sess.MessageCount, State: o.state})
	first := cmd.NextSequence
	o.submit(carried, cmd, func(res persistence.Result) { o.appended(carried, first, ts, res) })
	o.next.Window = maxAppendWindow
}

// turns builds the turn of each append of run that admit (nil: every one)
// lets through, and answers the others with admit's or the turn's error at
// once: they are carried by no write.
func (o *owner) turns(run []*lifecycle.Request, ts *timestamppb.Timestamp, now time.Time, admit func(*sessionv1.AppendRequest) error) ([]*lifecycle.Request, []persistence.Turn) {
	carried := make([]*lifecycle.Request, 0, len(run))
	turns := make([]persistence.Turn, 0, len(run))
	for _, r := range run {
		a, _ := asAppend(r.Msg)
		var err error
		if admit != nil {
			err = admit(a)
		}
		var t persistence.Turn
		if err == nil {
			t, err = o.turn(a, ts, now)
		}
		if err != nil {
			o.reply(r, nil, err)
			continue
		}
		carried = append(carried, r)
		turns = append(turns, t)
	}
	return carried, turns
}

// startBlind builds the write of a fresh owner's first append run, which
// nothing was loaded for (Blind): the kernel folds it into the activation,
// and it is decided (AppendMessages.DecideSequence) on the session's head as
// the store reads it once the epoch is taken (persistence.Activate). Its run
// holds no conditional append (those are not Blind, and lead their runs).
// Only a committed write reaches the finish function (a failed fold is
// decided again after a load), which takes the session as the store read it.
func (o *owner) startBlind(run []*lifecycle.Request, ts *timestamppb.Timestamp, now time.Time) {
	carried, turns := o.turns(run, ts, now, nil)
	if len(carried) == 0 {
		return
	}
	cmd := &persistence.AppendMessages{SessionID: o.id, Turns: turns, UpdatedAt: now}
	o.submit(carried, cmd, func(res persistence.Result) {
		h := res.Head
		if res.Err == nil && h == nil {
			res.Err = errs.Internal("session %s: the store committed a blind append without reporting the session it read", o.id)
		}
		if res.Err != nil {
			// Not a folded write's failure (the kernel decides those
			// again): the owner stopped with it in flight.
			for _, r := range carried {
				o.reply(r, nil, res.Err)
			}
			o.stale = true
			return
		}
		// What the store read: the session exists and is active. The
		// rest of it is loaded before a request that needs it (Partly).
		o.sess = &sessionv1.Session{SessionId: o.id, State: sessionv1.SessionState_SESSION_STATE_ACTIVE,
			MessageCount: h.NextSequence, UpdatedAt: timestamppb.New(h.UpdatedAt)}
		o.state, o.partial = h.State, true
		o.appended(carried, h.NextSequence, ts, res)
	})
	o.next.Window = maxAppendWindow
}

func (o *owner) appendable() error {
	switch {
	case o.sess == nil:
		return o.notFound()
	case o.sess.GetState() == sessionv1.SessionState_SESSION_STATE_CLOSED:
		return errs.FailedPrecondition("session %s is closed; appends are refused", o.id)
	}
	return nil
}

// turn converts one normalised append into a Turn.
func (o *owner) turn(a *sessionv1.AppendRequest, ts *timestamppb.Timestamp, now time.Time) (persistence.Turn, error) {
	t := persistence.Turn{Messages: make([]*sessionv1.Message, len(a.Messages)), State: a.StateDelta}
	if len(a.ScopeDeltas) > 0 {
		t.Scopes = fromScopeDeltas(a.ScopeDeltas)
	}
	for i, m := range a.Messages {
		t.Messages[i] = &sessionv1.Message{
			SessionId:    o.id,
			MessageId:    m.MessageId,
			Role:         m.Role,
			Content:      m.Content,
			MetadataJson: m.MetadataJson,
			CreatedAt:    ts,
			EventTime:    m.EventTime,
		}
	}
	if o.env.cfg.AuditMessages {
		t.Audit = make([]*auditv1.AuditEntry, 0, len(a.Messages))
		for _, m := range a.Messages {
			e, err := o.entry(audit.EventMessageAppended, "", map[string]any{"message_id": m.MessageId, "role": roleNames[m.Role]}, now)
			if err != nil {
				return t, err
			}
			t.Audit = append(t.Audit, e)
		}
	}
	return t, nil
}

// appended answers each carried append with its turn's outcome, in turn
// order, which is sequence order: acknowledgement order is sequence order.
func (o *owner) appended(carried []*lifecycle.Request, first int64, ts *timestamppb.Timestamp, res persistence.Result) {
	if res.Err == nil && len(res.Turns) != len(carried) {
		res.Err = errs.Internal("session %s: the store answered %d turns for %d", o.id, len(res.Turns), len(carried))
	}
	if res.Err != nil {
		// Nothing of the command is stored; the next sequence stays
		// at last committed + 1.
		for _, r := range carried {
			o.reply(r, nil, res.Err)
		}
		o.failed(res.Err)
		return
	}
	next, stored := first, false
	// state follows the stored turns' deltas only to answer UpdateState
	// with the state its own write left; the owner's state is the
	// store's (res.State), as its next sequence is.
	state, track := o.state, false
	for _, r := range carried {
		_, u := r.Msg.(*sessionv1.UpdateStateRequest)
		track = track || u
	}
	for i, r := range carried {
		tr := res.Turns[i]
		if tr.Err != nil {
			o.reply(r, nil, tr.Err)
			continue
		}
		a, _ := asAppend(r.Msg)
		resp, err := appendResponse(a, tr)
		if err != nil {
			o.stale = true
			o.reply(r, nil, err)
			continue
		}
		if !tr.Duplicate {
			stored = true
			for _, m := range tr.Messages {
				if m.GetSequence() != next {
					o.stale = true // a store bug; reload rather than guess
				}
				next++
			}
			resp.NextSequence = next
		} else {
			resp.NextSequence = res.NextSequence
		}
		if u, ok := r.Msg.(*sessionv1.UpdateStateRequest); ok {
			if !tr.Duplicate && u.StateDelta != nil {
				if state, err = persistence.ApplyDelta("session "+o.id, state, u.StateDelta); err != nil {
					o.stale = true
				}
			}
			o.reply(r, &sessionv1.UpdateStateResponse{StateJson: state, NextSequence: resp.NextSequence}, nil)
			continue
		}
		if track && !tr.Duplicate && a.StateDelta != nil {
			// Only to answer a later UpdateState of this write.
			if state, err = persistence.ApplyDelta("session "+o.id, state, a.StateDelta); err != nil {
				o.stale = true
			}
		}
		o.reply(r, resp, nil)
	}
	if res.NextSequence != next {
		o.stale = true
	}
	o.sess.MessageCount = res.NextSequence
	if res.State != "" {
		o.state = res.State
	}
	if stored {
		o.sess.UpdatedAt = ts
	}
}

// appendResponse lists the stored message of each request message, in
// request order. The store reports a turn's messages in turn order (a
// duplicate turn's are the stored originals); when that does not line up
// by id, they are matched by id.
func appendResponse(a *sessionv1.AppendRequest, tr persistence.TurnResult) (*sessionv1.AppendResponse, error) {
	stored := tr.Messages
	if !sameIDs(a.Messages, stored) {
		byID := make(map[string]*sessionv1.Message, len(tr.Messages))
		for _, m := range tr.Messages {
			byID[m.GetMessageId()] = m
		}
		stored = make([]*sessionv1.Message, len(a.Messages))
		for i, m := range a.Messages {
			if stored[i] = byID[m.MessageId]; stored[i] == nil {
				return nil, errs.Internal("session %s: the store did not report message %s", a.SessionId, m.MessageId)
			}
		}
	}
	out := &sessionv1.AppendResponse{Messages: make([]*sessionv1.AppendedMessage, len(a.Messages)), Duplicate: tr.Duplicate}
	for i, s := range stored {
		out.Messages[i] = &sessionv1.AppendedMessage{
			MessageId: s.GetMessageId(),
			Sequence:  s.GetSequence(),
			CreatedAt: timestamppb.New(s.GetCreatedAt().AsTime()),
		}
	}
	return out, nil
}

func sameIDs(req []*sessionv1.NewMessage, stored []*sessionv1.Message) bool {
	if len(req) != len(stored) {
		return false
	}
	for i, m := range req {
		if stored[i].GetMessageId() != m.MessageId {
			return false
		}
	}
	return true
}

// failed marks the state for a reload when the error says memory and
// store disagree (a sequence conflict, a vanished session, a store bug) or
// may disagree (OUTCOME_UNKNOWN: the write may have committed).
// Transaction-level failures (disk full, I/O) stored nothing and change
// nothing.
func (o *owner) failed(err error) {
	switch errs.CodeOf(err) {
	case errs.FailedPreconditionCode, errs.NotFoundCode, errs.AlreadyExistsCode, errs.InternalCode, errs.OutcomeUnknownCode:
		o.stale = true
	}
}

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
		o.reply(r, &sessionv1.DeleteSessionResponse{MessagesRemoved: res.MessagesRemoved, PlansOrphaned: res.PlansOrphaned}, nil)
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

// entry builds an audit entry about this session.
func (o *owner) entry(event, planID string, details map[string]any, now time.Time) (*auditv1.AuditEntry, error) {
	return newEntry(event, o.id, o.sess.GetActorName(), planID, details, now)
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
func createdEntry(sessionID string, c *sessionv1.CreateSessionRequest, now time.Time) (*auditv1.AuditEntry, error) {
	b, err := json.Marshal(createdDetails{Automation: c.Automation, Namespace: c.Namespace})
	if err != nil {
		return nil, errs.Internal("audit details of %s: %v", audit.EventSessionCreated, err)
	}
	e, err := audit.NewOwnEntry(&auditv1.RecordRequest{EventType: audit.EventSessionCreated, SessionId: sessionID,
		ActorName: c.ActorName, DetailsJson: string(b)}, now)
	if err != nil {
		return nil, errs.Internal("audit entry %s: %v", audit.EventSessionCreated, err)
	}
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
