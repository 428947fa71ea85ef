package session

import (
	"context"
	"errors"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/lifecycle"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ReplaceSuffix atomically replaces the session's newest messages (issue
// 30): decided by the session's owner, which owns the next sequence, on
// the head it holds — a cold owner loads the session first (the request
// is neither folded nor blind) — and committed by the writer in one
// command (persistence.ReplaceSuffix).
func (s *Service) ReplaceSuffix(ctx context.Context, req *sessionv1.ReplaceSuffixRequest) (*sessionv1.ReplaceSuffixResponse, error) {
	n, err := normalizeReplace(req, s.env.cfg)
	if err != nil {
		return nil, err
	}
	return routed[*sessionv1.ReplaceSuffixResponse](ctx, s, n)
}

// normalizeReplace checks a replacement: the session id, a cut (one of
// from_sequence and remove_last, not negative), the required expectation,
// and its messages and deltas as an append's.
func normalizeReplace(req *sessionv1.ReplaceSuffixRequest, cfg Config) (*sessionv1.ReplaceSuffixRequest, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	if req.ExpectedNextSequence == nil {
		return nil, errs.InvalidArgument("expected_next_sequence is required")
	}
	if err := checkExpected("expected_next_sequence", req.ExpectedNextSequence); err != nil {
		return nil, err
	}
	out := &sessionv1.ReplaceSuffixRequest{SessionId: req.GetSessionId(), ExpectedNextSequence: req.ExpectedNextSequence}
	switch f := req.GetFrom().(type) {
	case *sessionv1.ReplaceSuffixRequest_FromSequence:
		if f.FromSequence < 0 {
			return nil, errs.InvalidArgument("from_sequence %d is negative", f.FromSequence)
		}
		out.From = &sessionv1.ReplaceSuffixRequest_FromSequence{FromSequence: f.FromSequence}
	case *sessionv1.ReplaceSuffixRequest_RemoveLast:
		if f.RemoveLast < 0 || f.RemoveLast > *req.ExpectedNextSequence {
			return nil, errs.InvalidArgument("remove_last %d is not within 0..expected_next_sequence (%d)", f.RemoveLast, *req.ExpectedNextSequence)
		}
		out.From = &sessionv1.ReplaceSuffixRequest_RemoveLast{RemoveLast: f.RemoveLast}
	default:
		return nil, errs.InvalidArgument("from_sequence or remove_last is required")
	}
	if len(req.GetMessages()) == 0 && req.GetStateDelta() == nil && len(req.GetScopeDeltas()) == 0 {
		return out, nil
	}
	a, err := normalizeAppend(&sessionv1.AppendRequest{SessionId: req.GetSessionId(), Messages: req.GetMessages(),
		StateDelta: req.GetStateDelta(), ScopeDeltas: req.GetScopeDeltas()}, cfg)
	if err != nil {
		return nil, err
	}
	out.Messages, out.StateDelta, out.ScopeDeltas = a.Messages, a.StateDelta, a.ScopeDeltas
	return out, nil
}

// cutOf is the sequence the replacement cuts at, as the client sees the
// session (at its expectation): so a retry names the same cut.
func cutOf(m *sessionv1.ReplaceSuffixRequest) int64 {
	if f, ok := m.GetFrom().(*sessionv1.ReplaceSuffixRequest_FromSequence); ok {
		return f.FromSequence
	}
	return m.GetExpectedNextSequence() - m.GetRemoveLast()
}

// replaceSuffix decides a replacement on the head the owner holds. An
// expectation that is not the next sequence is refused here, unless the
// replacement stores messages: then the store decides whether it is a
// retry of one that committed (a duplicate) or a mismatch.
func (o *owner) replaceSuffix(r *lifecycle.Request, m *sessionv1.ReplaceSuffixRequest) {
	switch {
	case o.sess == nil:
		o.reply(r, nil, o.notFound())
		return
	case o.sess.GetState() == sessionv1.SessionState_SESSION_STATE_CLOSED:
		o.reply(r, nil, errs.FailedPrecondition("session %s is closed; its messages cannot be replaced", o.id))
		return
	}
	next, exp, from := o.sess.MessageCount, m.GetExpectedNextSequence(), cutOf(m)
	if exp != next && len(m.Messages) == 0 {
		o.reply(r, nil, &persistence.SequenceMismatchError{SessionID: o.id, Expected: exp, Next: next})
		return
	}
	now := time.Now().UTC()
	ts := timestamppb.New(now)
	t, err := o.turn(r, &sessionv1.AppendRequest{SessionId: o.id, Messages: m.Messages, StateDelta: m.StateDelta, ScopeDeltas: m.ScopeDeltas}, ts, now)
	if err != nil {
		o.reply(r, nil, err)
		return
	}
	e, err := o.entry(r, audit.EventSessionRewound, "", map[string]any{
		"from_sequence": from, "previous_next_sequence": next, "removed": max(next-from, 0), "added": len(m.Messages),
	}, now)
	if err != nil {
		o.reply(r, nil, err)
		return
	}
	cmd := &persistence.ReplaceSuffix{Epoch: o.epoch, SessionID: o.id, From: from, Expected: exp, Turn: t,
		UpdatedAt: now, Audit: []*auditv1.AuditEntry{e}}
	cmd.DecideSequence(persistence.SessionHead{NextSequence: next, State: o.state})
	o.submitOne(r, cmd, func(res persistence.Result) {
		if res.Err != nil {
			// A mismatch was decided on the head the store holds too
			// (it checks that first): memory is right.
			var mm *persistence.SequenceMismatchError
			if !errors.As(res.Err, &mm) {
				o.failed(res.Err)
			}
			o.reply(r, nil, res.Err)
			return
		}
		sr := cmd.ResultOf(res)
		if !sr.Duplicate {
			o.sess.MessageCount = sr.NextSequence
			if sr.State != "" {
				o.state = sr.State
			}
			o.sess.UpdatedAt = ts
		}
		o.reply(r, replaceResponse(m, sr), nil)
	})
}

func replaceResponse(m *sessionv1.ReplaceSuffixRequest, sr persistence.SuffixResult) *sessionv1.ReplaceSuffixResponse {
	out := &sessionv1.ReplaceSuffixResponse{Removed: sr.Removed, NextSequence: sr.NextSequence, Duplicate: sr.Duplicate,
		Messages: make([]*sessionv1.AppendedMessage, len(sr.Messages))}
	for i, s := range sr.Messages {
		out.Messages[i] = &sessionv1.AppendedMessage{MessageId: s.GetMessageId(), Sequence: s.GetSequence(),
			CreatedAt: timestamppb.New(s.GetCreatedAt().AsTime()), Kept: sr.Kept != nil && sr.Kept[i]}
	}
	return out
}
