package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

// A streamed import (ImportFrom) stores the new session staged
// (persistence.SessionStateStaged: no read shows it) and its messages in
// transactions of bounded size as the chunks come, then makes it active in
// one last small transaction once the trailer's checksum matched. The node
// holds one batch at a time, and no transaction grows with the session.
//
// The importer activates the new id (persistence.Activate) and writes with
// that epoch. A failed import removes what it staged (discardStaged, in
// bounded transactions). One whose importer died (kill -9, a lost node) is
// found by the sweep (sweepStaged: staged sessions not written to for
// Config.ImportIdleTimeout), which activates the id anew — fencing out an
// importer that was only slow, so it cannot make a half-removed session
// active — and removes it.

// Bounds on one transaction of a streamed import, and of its removal.
const (
	importBatchMessages = 1000
	importBatchBytes    = 4 << 20
	discardBatch        = 10000
)

// ImportFrom imports a session from the chunks next returns: a header,
// pages of messages (sequences 0..n-1 in order, n the header's
// message_count), a trailer with the checksum, then io.EOF. It validates
// everything as Import does and answers the new session once it is visible;
// on any error nothing of it is visible and what was staged is removed.
func (s *Service) ImportFrom(ctx context.Context, next func() (*sessionv1.ImportChunk, error)) (*sessionv1.ImportSessionResponse, error) {
	if s.closing.Load() {
		return nil, errUnavailableStopping()
	}
	first, err := next()
	if err != nil {
		return nil, receiveErr(err, "the header")
	}
	if err := checkKnownFields(first.ProtoReflect(), "chunk 0"); err != nil {
		return nil, err
	}
	h := first.GetHeader()
	if h == nil {
		return nil, errs.InvalidArgument("an import starts with its header chunk")
	}
	if h.GetSchemaVersion() != SchemaVersion {
		return nil, errs.InvalidArgument("schema_version %q is not supported; want %q", clip(h.GetSchemaVersion()), SchemaVersion)
	}
	ds := withStateAndSnapshot(exportSessionOf(h.GetSession()), orEmptyObject(h.GetStateJson()), h.GetSnapshot())
	links := exportLinksOf(h.GetSession())
	im := &streamedImport{s: s, ds: ds, next: next}
	sess, err := importHeader(ds, links, ids.New(), time.Now().UTC(), s.env.cfg)
	if err != nil {
		return nil, err
	}
	if _, _, err := importStateAndSnapshot(ds); err != nil {
		return nil, err // refused before anything is staged
	}
	im.sess = sess
	im.hash, im.sum = newHashingWriter(nil)
	if err := im.hash.begin(ds); err != nil {
		return nil, err
	}
	resp, err := im.run(ctx, links)
	if err != nil && im.epoch > 0 && !im.committing {
		s.discardStaged(sess.SessionId, im.epoch)
	}
	switch {
	case errors.Is(err, persistence.ErrFenced):
		// Only the sweep takes a staged session from its importer.
		return nil, errs.Unavailable("import abandoned: nothing was received for longer than %v, and what was staged is removed; import again", s.env.cfg.ImportIdleTimeout)
	case err != nil && !im.committing && errs.CodeOf(err) == errs.OutcomeUnknownCode:
		// A staged write whose outcome is unknown does not make the
		// import's outcome unknown: nothing of it is visible before the
		// last write, and what was staged is removed.
		return nil, errs.Unavailable("import failed before its last write (%s); nothing of it is visible; import again", errs.From(err).Msg)
	}
	return resp, err
}

type streamedImport struct {
	s    *Service
	ds   exportSession
	sess *sessionv1.Session
	next func() (*sessionv1.ImportChunk, error)
	hash *canonicalWriter
	sum  func() string
	// epoch is the staged session's, once activated.
	epoch int64
	// stored messages are committed; batch waits for the next write.
	stored     int64
	batch      []persistence.Turn
	batchBytes int
	received   int64
	chunks     int
	// committing: the write that makes the session visible was sent, so
	// it may have committed and the session must not be removed.
	committing bool
}

func (im *streamedImport) apply(ctx context.Context, cmd persistence.Command) (persistence.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, im.s.env.cfg.AskTimeout)
	defer cancel()
	res, err := im.s.wr.Apply(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	return res, err
}

func (im *streamedImport) run(ctx context.Context, links []exportLink) (*sessionv1.ImportSessionResponse, error) {
	id := im.sess.SessionId
	res, err := im.apply(ctx, &persistence.Activate{Kind: persistence.OwnerSession, ID: id})
	if err != nil {
		return nil, err
	}
	im.epoch = res.Epoch
	staged := proto.CloneOf(im.sess)
	staged.State, staged.MessageCount = persistence.SessionStateStaged, 0
	state, snap, err := importStateAndSnapshot(im.ds)
	if err != nil {
		return nil, err
	}
	if _, err := im.apply(ctx, &persistence.CreateSession{Epoch: im.epoch, Session: staged, State: state, Snapshot: snap}); err != nil {
		return nil, err
	}
	var trailer *sessionv1.ExportTrailer
	for trailer == nil {
		c, err := im.next()
		if err != nil {
			return nil, receiveErr(err, "a page or the trailer")
		}
		im.chunks++
		if err := checkKnownFields(c.ProtoReflect(), fmt.Sprintf("chunk %d", im.chunks)); err != nil {
			return nil, err
		}
		switch p := c.GetPart().(type) {
		case *sessionv1.ImportChunk_Page:
			if err := im.page(ctx, p.Page.GetMessages()); err != nil {
				return nil, err
			}
		case *sessionv1.ImportChunk_Trailer:
			trailer = p.Trailer
		default:
			return nil, errs.InvalidArgument("after the header an import has pages, then its trailer; got %T", c.GetPart())
		}
	}
	if im.received != im.ds.MessageCount {
		return nil, errs.InvalidArgument("session.message_count is %d but the import has %d messages", im.ds.MessageCount, im.received)
	}
	if c, err := im.next(); err != io.EOF {
		if err != nil {
			return nil, receiveErr(err, "the end")
		}
		return nil, errs.InvalidArgument("an import ends with its trailer; got %T after it", c.GetPart())
	}
	if err := im.hash.end(links); err != nil {
		return nil, err
	}
	if err := checkChecksum(trailer.GetChecksum(), im.sum()); err != nil {
		return nil, err
	}
	if err := im.flush(ctx); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	e, err := importedEntry(principal.Of(ctx), im.sess, im.ds.SessionID, now)
	if err != nil {
		return nil, err
	}
	im.committing = true
	if _, err := im.apply(ctx, &persistence.UpdateSession{Epoch: im.epoch, SessionID: id,
		State: sessionv1.SessionState_SESSION_STATE_ACTIVE, UpdatedAt: now, Audit: []*auditv1.AuditEntry{e}}); err != nil {
		// OUTCOME_UNKNOWN: it may be visible and stays; anything else
		// stored nothing, and the staged session goes.
		im.committing = errs.CodeOf(err) == errs.OutcomeUnknownCode
		return nil, err
	}
	im.sess.UpdatedAt = persistence.Stamp(now.UnixNano())
	return &sessionv1.ImportSessionResponse{Session: im.sess, MessagesImported: im.stored, Checksum: im.sum()}, nil
}

// page validates and hashes one page's messages and stages them in batches.
func (im *streamedImport) page(ctx context.Context, msgs []*sessionv1.Message) error {
	for _, pm := range msgs {
		i := im.received
		if i >= im.ds.MessageCount {
			return errs.InvalidArgument("session.message_count is %d but the import has more messages", im.ds.MessageCount)
		}
		em := exportMessageOf(pm)
		if err := im.hash.message(em); err != nil {
			return err
		}
		m, err := importMessage(int(i), im.ds.FirstSequence, em, im.sess.SessionId, im.s.env.cfg)
		if err != nil {
			return err
		}
		im.received++
		im.batch = append(im.batch, persistence.Turn{Messages: []*sessionv1.Message{m}})
		im.batchBytes += persistence.MessagePageBytes(len(m.Content), len(m.MetadataJson))
		if len(im.batch) >= importBatchMessages || im.batchBytes >= importBatchBytes {
			if err := im.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush stages the waiting messages in one transaction, one turn per
// message, so that the store's per-turn duplicate detection names a
// message id used twice in the import (the node keeps no set of ids).
func (im *streamedImport) flush(ctx context.Context) error {
	if len(im.batch) == 0 {
		return nil
	}
	cmd := &persistence.AppendMessages{Epoch: im.epoch, SessionID: im.sess.SessionId,
		NextSequence: im.ds.FirstSequence + im.stored, Turns: im.batch, UpdatedAt: time.Now().UTC()}
	r, err := im.apply(ctx, cmd)
	if err != nil {
		return err
	}
	res := cmd.ResultOf(r)
	for j, tr := range res.Turns {
		i := im.stored + int64(j)
		switch {
		case tr.Err != nil:
			return errs.InvalidArgument("messages[%d]: %s", i, errs.From(tr.Err).Msg)
		case tr.Duplicate:
			return errs.InvalidArgument("messages[%d].message_id %s repeats an earlier message", i, im.batch[j].Messages[0].MessageId)
		}
	}
	if want := im.ds.FirstSequence + im.stored + int64(len(im.batch)); res.NextSequence != want {
		return errs.Internal("import of session %s: staged up to sequence %d, want %d", im.sess.SessionId, res.NextSequence, want)
	}
	im.stored += int64(len(im.batch))
	clear(im.batch)
	im.batch, im.batchBytes = im.batch[:0], 0
	return nil
}

// receiveErr is the error of a failed receive: the client's stream ended
// early or broke.
func receiveErr(err error, want string) error {
	if err == io.EOF {
		return errs.InvalidArgument("the import ended before %s", want)
	}
	if e := errs.From(err); e.Code != errs.InternalCode {
		return e
	}
	return errs.Unavailable("receiving the import: %v", err)
}

// discardStaged removes the staged session id, holding epoch, in bounded
// transactions. It runs on its own context: the import's may have ended
// (the client left). A failure leaves the rest to the sweep.
func (s *Service) discardStaged(id string, epoch int64) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.env.cfg.AskTimeout)
		cmd := &persistence.DeleteSession{Epoch: epoch, SessionID: id, Limit: discardBatch}
		res, err := s.wr.Apply(ctx, cmd)
		cancel()
		if err == nil {
			err = res.Err
		}
		if err != nil || cmd.ResultOf(res).MessagesRemoved < discardBatch {
			return
		}
	}
}

// sweepStaged removes the staged sessions whose import has written nothing
// for idle (Config.ImportIdleTimeout): their importer is gone (or too slow,
// and its next write is fenced by the sweep's activation).
func (s *Service) sweepStaged(ctx context.Context, idle time.Duration) error {
	cutoff := time.Now().Add(-idle)
	after := ""
	for {
		page, err := s.env.reader.ListSessions(ctx, persistence.SessionFilter{State: persistence.SessionStateStaged, AfterID: after, Limit: 100})
		if err != nil {
			return errs.From(err)
		}
		for _, sess := range page {
			after = sess.GetSessionId()
			if !sess.GetUpdatedAt().AsTime().Before(cutoff) {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, s.env.cfg.AskTimeout)
			res, err := s.wr.Apply(actx, &persistence.Activate{Kind: persistence.OwnerSession, ID: after})
			cancel()
			if err == nil {
				err = res.Err
			}
			if err != nil {
				return err
			}
			s.discardStaged(after, res.Epoch)
		}
		if len(page) < 100 {
			return nil
		}
	}
}

// sweeper runs sweepStaged at start and then every ImportIdleTimeout, until
// stop is closed.
func (s *Service) sweeper(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	t := time.NewTicker(s.env.cfg.ImportIdleTimeout)
	defer t.Stop()
	for first := true; ; first = false {
		_ = s.sweepStaged(ctx, s.env.cfg.ImportIdleTimeout) // a failed sweep is retried at the next tick
		if first {
			close(s.firstSweep)
		}
		select {
		case <-t.C:
		case <-stop:
			return
		}
	}
}
