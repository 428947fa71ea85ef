package session

import (
	"context"
	"fmt"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/lifecycle"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The session actor's retention writes: truncation, the snapshot slot and
// expiry. Like every write they change memory only for what committed.

// truncateChunk bounds the messages one truncation command removes, so a
// truncation of a long history is a series of small transactions (the
// owner sends them one after another; it answers after the last).
var truncateChunk = 10_000

// truncate removes messages through m.ThroughSequence (clamped to the last
// stored sequence: the next sequence never moves) in chunks; removed is
// what earlier chunks of this request removed.
func (o *owner) truncate(r *lifecycle.Request, m *sessionv1.TruncateRequest, removed int64) {
	if o.sess == nil {
		o.reply(r, nil, o.notFound())
		return
	}
	through := min(m.ThroughSequence, o.sess.MessageCount-1)
	if through < o.sess.FirstSequence {
		o.reply(r, &sessionv1.TruncateResponse{MessagesRemoved: removed, FirstSequence: o.sess.FirstSequence}, nil)
		return
	}
	now := time.Now().UTC()
	var entries []*auditv1.AuditEntry
	if removed == 0 {
		e, err := o.entry(r, audit.EventSessionTruncated, "", map[string]any{"through_sequence": through}, now)
		if err != nil {
			o.reply(r, nil, err)
			return
		}
		entries = []*auditv1.AuditEntry{e}
	}
	cmd := &persistence.TruncateSession{Epoch: o.epoch, SessionID: o.id, Through: through, Limit: truncateChunk,
		UpdatedAt: now, Audit: entries}
	o.submitOne(r, cmd, func(res persistence.Result) {
		if res.Err != nil {
			o.failed(res.Err)
			o.reply(r, nil, res.Err)
			return
		}
		n := cmd.ResultOf(res).Removed
		removed += n
		o.sess.UpdatedAt = timestamppb.New(now)
		if n < int64(truncateChunk) {
			o.sess.FirstSequence = max(o.sess.FirstSequence, through+1)
			o.reply(r, &sessionv1.TruncateResponse{MessagesRemoved: removed, FirstSequence: o.sess.FirstSequence}, nil)
			return
		}
		// More to remove: the next chunk is submitted at once, before
		// anything queued is decided, as the rest of this request. The
		// first sequence in memory stays where it was until the last
		// chunk; only the store knows the cut in between, and nothing
		// the owner decides depends on it but this request.
		o.truncate(r, &sessionv1.TruncateRequest{SessionId: m.SessionId, ThroughSequence: through}, removed)
	})
}

// snapshotInRange checks that a snapshot covering the messages through seq
// can be resumed from on a session whose messages first..next-1 are
// stored: it covers no message that does not exist (seq < next), and what
// it does not cover is still stored (seq >= first-1). A snapshot past the
// end would resume a reader past its last message; one older than the
// truncation point would skip the messages truncated after it.
func snapshotInRange(seq, first, next int64) error {
	if seq >= next {
		return fmt.Errorf("snapshot sequence %d is past the last message (%d)", seq, next-1)
	}
	if seq < first-1 {
		return fmt.Errorf("snapshot sequence %d is older than the truncation point: messages through %d were removed", seq, first-1)
	}
	return nil
}

func (o *owner) putSnapshot(r *lifecycle.Request, m *sessionv1.PutSnapshotRequest) {
	if o.sess == nil {
		o.reply(r, nil, o.notFound())
		return
	}
	if err := snapshotInRange(m.Sequence, o.sess.FirstSequence, o.sess.MessageCount); err != nil {
		o.reply(r, nil, errs.FailedPrecondition("session %s: %v", o.id, err))
		return
	}
	snap := &sessionv1.Snapshot{Sequence: m.Sequence, Data: m.Data, CreatedAt: timestamppb.New(time.Now().UTC())}
	cmd := &persistence.PutSnapshot{Epoch: o.epoch, SessionID: o.id, Snapshot: snap}
	o.submitOne(r, cmd, func(res persistence.Result) {
		if res.Err != nil {
			o.failed(res.Err)
			o.reply(r, nil, res.Err)
			return
		}
		o.reply(r, &sessionv1.PutSnapshotResponse{Snapshot: &sessionv1.Snapshot{Sequence: snap.Sequence, CreatedAt: snap.CreatedAt}}, nil)
	})
}

func (o *owner) deleteSnapshot(r *lifecycle.Request, m *sessionv1.DeleteSnapshotRequest) {
	if o.sess == nil {
		o.reply(r, nil, o.notFound())
		return
	}
	cmd := &persistence.PutSnapshot{Epoch: o.epoch, SessionID: o.id, DeleteThrough: m.ThroughSequence}
	o.submitOne(r, cmd, func(res persistence.Result) {
		if res.Err != nil {
			o.failed(res.Err)
			o.reply(r, nil, res.Err)
			return
		}
		o.reply(r, &sessionv1.DeleteSnapshotResponse{Deleted: cmd.ResultOf(res).Removed > 0}, nil)
	})
}

func (o *owner) setExpiry(r *lifecycle.Request, m *sessionv1.SetExpiryRequest) {
	if o.sess == nil {
		o.reply(r, nil, o.notFound())
		return
	}
	now := time.Now().UTC()
	var at time.Time
	if !m.Clear {
		at = m.ExpiresAt.AsTime()
	}
	cmd := &persistence.UpdateSession{Epoch: o.epoch, SessionID: o.id, SetExpiry: true, ExpiresAt: at, UpdatedAt: now}
	o.submitOne(r, cmd, func(res persistence.Result) {
		if res.Err != nil {
			o.failed(res.Err)
			o.reply(r, nil, res.Err)
			return
		}
		o.sess.ExpiresAt = nil
		if !m.Clear {
			o.sess.ExpiresAt = m.ExpiresAt
		}
		o.sess.UpdatedAt = timestamppb.New(now)
		o.reply(r, &sessionv1.SetExpiryResponse{Session: o.snapshot()}, nil)
	})
}

// expirySweepBatch bounds the sessions one sweep round reads and deletes;
// each deletion is its own small write through the session's owner.
const expirySweepBatch = 100

// expirySweeper deletes expired sessions every ExpirySweepInterval until
// stop is closed. Each deletion goes through the session's owner (as a
// Delete with only_if_expired), so it is fenced, audited (session_deleted
// with reason "expired") and loses to a SetExpiry the owner decided first.
func (s *Service) expirySweeper(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	t := time.NewTicker(s.env.cfg.ExpirySweepInterval)
	defer t.Stop()
	for {
		_, _ = s.sweepExpired(ctx, time.Now()) // a failed round is retried at the next tick
		select {
		case <-t.C:
		case <-stop:
			return
		}
	}
}

// sweepExpired deletes the sessions expired at now, in rounds of
// expirySweepBatch, and returns how many it deleted. A session whose
// delete failed (its expiry moved, a store error) is skipped this time.
func (s *Service) sweepExpired(ctx context.Context, now time.Time) (int, error) {
	// The node deletes on its own behalf: its entries name principal.Node.
	ctx = principal.With(ctx, principal.Node)
	deleted := 0
	skipped := map[string]bool{}
	for {
		idsNow, err := s.env.reader.ListExpired(ctx, now, expirySweepBatch+len(skipped))
		if err != nil {
			return deleted, err
		}
		progress := false
		for _, id := range idsNow {
			if skipped[id] {
				continue
			}
			_, err := routed[*sessionv1.DeleteSessionResponse](ctx, s, &sessionv1.DeleteSessionRequest{SessionId: id, OnlyIfExpired: true})
			if err != nil {
				if ctx.Err() != nil {
					return deleted, ctx.Err()
				}
				skipped[id] = true
				continue
			}
			deleted++
			progress = true
		}
		if !progress || len(idsNow) < expirySweepBatch+len(skipped) {
			return deleted, nil
		}
	}
}
