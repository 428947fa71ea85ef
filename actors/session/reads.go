package session

import (
	"bytes"
	"context"
	"errors"
	"io"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
)

// Reads run on the store's read-only connections, never through a session
// actor: they see every acknowledged write (acks follow commit) and do not
// queue behind a busy session's writes.

func (s *Service) get(ctx context.Context, req *sessionv1.GetSessionRequest) (*sessionv1.GetSessionResponse, error) {
	id := req.GetSessionId()
	if id == "" && req.GetClientKey() != "" {
		// By client key: one index lookup, then the read by id.
		ns := req.GetNamespace()
		if ns == "" {
			ns = defaultNamespace
		}
		if err := checkText("client_key", req.GetClientKey(), maxNameBytes); err != nil {
			return nil, err
		}
		if err := checkText("namespace", ns, maxNameBytes); err != nil {
			return nil, err
		}
		var err error
		if id, err = s.env.reader.FindSession(ctx, ns, req.GetClientKey()); err != nil {
			return nil, errs.From(err)
		}
	} else if err := ids.Check("session_id", id); err != nil {
		return nil, err
	}
	sess, err := s.env.reader.GetSession(ctx, id)
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
	f := persistence.MessageFilter{SessionID: req.GetSessionId(), From: from, Limit: limit, Last: int(req.GetLast())}
	if f.After, err = timeBound("after_time", req.GetAfterTime()); err != nil {
		return nil, err
	}
	if f.Before, err = timeBound("before_time", req.GetBeforeTime()); err != nil {
		return nil, err
	}
	if req.GetLast() < 0 {
		return nil, errs.InvalidArgument("last %d is negative", req.GetLast())
	}
	msgs, err := s.env.reader.ListMessagesWhere(ctx, f)
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

// maxUnaryExportBytes bounds the data of a unary Export: its reply must fit
// the 4 MiB a default gRPC client receives, with room for the checksum and
// framing. A larger session is exported with ExportStream.
const maxUnaryExportBytes = 4<<20 - 4<<10

// export is ExportStream's walk, kept in one buffer: the canonical form
// with the checksum added as its last field. It stops as soon as the data
// would not fit one reply, so a session too large for it costs the node no
// more than the cap.
func (s *Service) export(ctx context.Context, req *sessionv1.ExportSessionRequest) (*sessionv1.ExportSessionResponse, error) {
	buf := &cappedBuffer{max: maxUnaryExportBytes}
	var sum string
	err := s.exportTo(ctx, req, buf, func(c *sessionv1.ExportChunk) error {
		sum = c.GetTrailer().GetChecksum()
		return nil
	})
	if errors.Is(err, errExportTooLarge) {
		return nil, errs.ResourceExhausted("session %s: its export is larger than the %d bytes one reply carries; use ExportStream (the CLI: session export --out FILE)",
			req.GetSessionId(), maxUnaryExportBytes)
	}
	if err != nil {
		return nil, err
	}
	data := buf.b.Bytes()
	// The checksum is the last field of the exported object (see exportDoc).
	data = append(data[:len(data)-1], `,"checksum":"`+sum+`"}`...)
	return &sessionv1.ExportSessionResponse{Data: string(data), Checksum: sum}, nil
}

var errExportTooLarge = errors.New("export too large for one reply")

type cappedBuffer struct {
	b   bytes.Buffer
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.b.Len()+len(p) > c.max {
		return 0, errExportTooLarge
	}
	return c.b.Write(p)
}

// ExportTo exports a session as chunks, handing each to send as it is made:
// a header (the session as read, its message_count the number of messages
// that follow), pages of messages in sequence order (a page as
// ListMessages returns it, so capped by bytes), and a trailer with the
// checksum, computed as the pages go. The node holds one page at a time,
// whatever the session's size. An error of send ends the export with it.
func (s *Service) ExportTo(ctx context.Context, req *sessionv1.ExportSessionRequest, send func(*sessionv1.ExportChunk) error) error {
	return s.exportTo(ctx, req, nil, send)
}

// exportTo reads the session, then its messages 0..message_count-1.
// Messages are immutable once stored and sequences dense, so the export is
// the session as of its read, whatever is appended meanwhile. doc, when not
// nil, receives the canonical form as it is hashed.
func (s *Service) exportTo(ctx context.Context, req *sessionv1.ExportSessionRequest, doc io.Writer, send func(*sessionv1.ExportChunk) error) error {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return err
	}
	sess, err := s.env.reader.GetSession(ctx, req.GetSessionId())
	if err != nil {
		return errs.From(err)
	}
	id, n := sess.GetSessionId(), sess.GetMessageCount()
	// The state and the snapshot are read after the session: an export
	// is not one snapshot of the store (appends may follow the session's
	// read), but each part is as committed.
	state, _, err := s.env.reader.GetSessionState(ctx, id)
	if err != nil {
		return errs.From(err)
	}
	snap, err := s.env.reader.GetSnapshot(ctx, id)
	if err != nil {
		return errs.From(err)
	}
	cw, sum := newHashingWriter(doc)
	if err := cw.begin(withStateAndSnapshot(exportSessionOf(sess), state, snap)); err != nil {
		return err
	}
	header := &sessionv1.ExportHeader{SchemaVersion: SchemaVersion, Session: sess, Snapshot: snap}
	if state != persistence.EmptyState {
		header.StateJson = state
	}
	if err := send(&sessionv1.ExportChunk{Part: &sessionv1.ExportChunk_Header{Header: header}}); err != nil {
		return err
	}
	for next := sess.GetFirstSequence(); next < n; {
		page, err := s.env.reader.ListMessages(ctx, id, next, maxPageSize)
		if err != nil {
			return errs.From(err)
		}
		if len(page) == 0 {
			// The session went while we read it.
			if _, err := s.env.reader.GetSession(ctx, id); err != nil {
				return errs.From(err)
			}
			return errs.Unavailable("session %s: read %d of %d messages; retry", id, next, n)
		}
		for i, m := range page {
			if m.GetSequence() >= n {
				page = page[:i]
				break
			}
			if m.GetSequence() != next {
				// Truncated while it was read.
				return errs.Unavailable("session %s: message %d was removed (truncated) during the export; retry", id, next)
			}
			if err := cw.message(exportMessageOf(m)); err != nil {
				return err
			}
			next++
		}
		if err := send(&sessionv1.ExportChunk{Part: &sessionv1.ExportChunk_Page{Page: &sessionv1.ExportPage{Messages: page}}}); err != nil {
			return err
		}
	}
	if err := cw.end(exportLinksOf(sess)); err != nil {
		return err
	}
	return send(&sessionv1.ExportChunk{Part: &sessionv1.ExportChunk_Trailer{Trailer: &sessionv1.ExportTrailer{Checksum: sum()}}})
}
