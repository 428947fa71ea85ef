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
	t := persistence.Turn{Messages: make([]*sessionv1.Message, len(a.Messages)), State: a.StateDelta, KeepStored: keepStored(a.Messages)}
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
			ItemKey:      m.ItemKey,
			Kind:         m.Kind,
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
			for i, m := range tr.Messages {
				if tr.IsKept(i) {
					continue // consumed no sequence
				}
				if m.GetSequence() != next {
					o.stale = true // a store bug; reload rather than guess
				}
				next++
				stored = true
			}
			stored = stored || a.StateDelta != nil || len(a.ScopeDeltas) > 0
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
	// A kept message's stored message has another id: the store answers
	// such a turn in turn order, which is request order.
	if tr.Kept != nil && len(stored) != len(a.Messages) {
		return nil, errs.Internal("session %s: the store answered %d messages for %d", a.SessionId, len(stored), len(a.Messages))
	}
	if tr.Kept == nil && !sameIDs(a.Messages, stored) {
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
			Kept:      tr.IsKept(i),
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
