package session

import (
	"context"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
)

// Reads run on the store's read-only connections, never through a session
// actor: they see every acknowledged write (acks follow commit) and do not
// queue behind a busy session's writes.

func (s *Service) get(ctx context.Context, req *sessionv1.GetSessionRequest) (*sessionv1.GetSessionResponse, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	sess, err := s.env.reader.GetSession(ctx, req.GetSessionId())
	if err != nil {
		return nil, errs.From(err)
	}
	return &sessionv1.GetSessionResponse{Session: sess}, nil
}

// list pages in session id order. next_cursor is set only when another
// session matches after this page, so an empty cursor means done.
func (s *Service) list(ctx context.Context, req *sessionv1.ListSessionsRequest) (*sessionv1.ListSessionsResponse, error) {
	f, err := listFilter(req)
	if err != nil {
		return nil, err
	}
	page, err := s.env.reader.ListSessions(ctx, f)
	if err != nil {
		return nil, errs.From(err)
	}
	out := &sessionv1.ListSessionsResponse{Sessions: page}
	if len(page) < f.Limit {
		return out, nil
	}
	last := page[len(page)-1].GetSessionId()
	probe := f
	probe.AfterID, probe.Limit = last, 1
	more, err := s.env.reader.ListSessions(ctx, probe)
	if err != nil {
		return nil, errs.From(err)
	}
	if len(more) > 0 {
		out.NextCursor = last
	}
	return out, nil
}

// listMessages reads in sequence order from from_sequence. Sequences are
// dense and never reused, so next_sequence stays a valid cursor however
// many appends follow.
func (s *Service) listMessages(ctx context.Context, req *sessionv1.ListMessagesRequest) (*sessionv1.ListMessagesResponse, error) {
	from, limit, err := checkListMessages(req)
	if err != nil {
		return nil, err
	}
	msgs, err := s.env.reader.ListMessages(ctx, req.GetSessionId(), from, limit)
	if err != nil {
		return nil, errs.From(err)
	}
	if len(msgs) == 0 {
		// Empty: the end of a session, or no session at all.
		if _, err := s.env.reader.GetSession(ctx, req.GetSessionId()); err != nil {
			return nil, errs.From(err)
		}
		return &sessionv1.ListMessagesResponse{NextSequence: from}, nil
	}
	return &sessionv1.ListMessagesResponse{Messages: msgs, NextSequence: msgs[len(msgs)-1].GetSequence() + 1}, nil
}

// export reads the session, then its messages 0..message_count-1. Messages
// are immutable once stored and sequences dense, so the export is the
// session as of its read, whatever is appended meanwhile.
func (s *Service) export(ctx context.Context, req *sessionv1.ExportSessionRequest) (*sessionv1.ExportSessionResponse, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	sess, err := s.env.reader.GetSession(ctx, req.GetSessionId())
	if err != nil {
		return nil, errs.From(err)
	}
	msgs, err := s.readAll(ctx, sess.GetSessionId(), sess.GetMessageCount())
	if err != nil {
		return nil, err
	}
	data, sum, err := seal(newExportDoc(sess, msgs))
	if err != nil {
		return nil, err
	}
	return &sessionv1.ExportSessionResponse{Data: data, Checksum: sum}, nil
}

func (s *Service) readAll(ctx context.Context, id string, n int64) ([]*sessionv1.Message, error) {
	msgs := make([]*sessionv1.Message, 0, n)
	for int64(len(msgs)) < n {
		page, err := s.env.reader.ListMessages(ctx, id, int64(len(msgs)), maxPageSize)
		if err != nil {
			return nil, errs.From(err)
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			if m.GetSequence() >= n {
				break
			}
			if m.GetSequence() != int64(len(msgs)) {
				return nil, errs.Internal("session %s: message sequence %d where %d was expected", id, m.GetSequence(), len(msgs))
			}
			msgs = append(msgs, m)
		}
	}
	if int64(len(msgs)) < n {
		// The session went while we read it.
		if _, err := s.env.reader.GetSession(ctx, id); err != nil {
			return nil, errs.From(err)
		}
		return nil, errs.Unavailable("session %s: read %d of %d messages; retry", id, len(msgs), n)
	}
	return msgs, nil
}
