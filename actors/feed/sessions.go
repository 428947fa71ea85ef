package feed

import (
	"context"
	"io"
	"sync/atomic"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/protobuf/proto"
)

// sessionRing is the recent messages of one tailed session: every message
// with start <= sequence < end (valid once the hub read the session), and
// how the session ended, once it did.
type sessionRing struct {
	valid      bool
	start, end int64
	msgs       []*sessionv1.Message
	bytes      int
	ended      feedv1.SessionEnded_Reason
	tails      int
	waiting    int // tails waiting at the ring's end for it to grow
	changed    chan struct{}
	// gen counts the rewinds the ring learned of (rewound.go); rewinds
	// and floor are their cuts.
	gen      uint64
	rewinds  []rewindMark
	floor    rewindMark
	hasFloor bool
}

func (r *sessionRing) broadcast() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// add appends the next messages (sequences end, end+1, ...) and cuts the
// start until the ring fits in limit bytes, keeping the new page.
func (r *sessionRing) add(ms []*sessionv1.Message, limit int) {
	for _, m := range ms {
		r.msgs = append(r.msgs, m)
		r.bytes += proto.Size(m)
	}
	r.end = ms[len(ms)-1].Sequence + 1
	cut := 0
	for r.bytes > limit && len(r.msgs)-cut > len(ms) {
		r.bytes -= proto.Size(r.msgs[cut])
		r.msgs[cut] = nil
		cut++
	}
	if cut > 0 {
		r.msgs = append([]*sessionv1.Message(nil), r.msgs[cut:]...)
		r.start = r.msgs[0].Sequence
	}
	r.broadcast()
}

// readSession brings one session's ring up to the store.
func (h *Hub) readSession(ctx context.Context, id string) error {
	h.mu.Lock()
	s := h.sessions[id]
	if s == nil || s.ended != 0 {
		h.mu.Unlock()
		return nil
	}
	valid, end, gen := s.valid, s.end, s.gen
	h.mu.Unlock()
	// current reports, under mu, whether s is still the session's ring
	// at end (its last tail may have left and another made a new one),
	// and no rewind came since this read began: what it read may be
	// removed already.
	current := func() bool { return h.sessions[id] == s && s.valid == valid && s.end == end && s.gen == gen }

	sess, err := h.r.GetSession(ctx, id)
	if errs.CodeOf(err) == errs.NotFoundCode {
		h.mu.Lock()
		if current() {
			s.valid, s.ended = true, feedv1.SessionEnded_REASON_DELETED
			if !valid {
				s.start, s.end = 0, 0
			}
			s.broadcast()
		}
		h.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	next := sess.GetMessageCount()
	if valid && next-end > maxCatchUp {
		// Stale for long (nobody waited on it): restart at the head
		// rather than read what would only be evicted again.
		h.mu.Lock()
		if current() {
			s.msgs, s.bytes, s.start, s.end = nil, 0, next, next
			end = next
			s.broadcast()
		}
		h.mu.Unlock()
	}
	if !valid {
		h.mu.Lock()
		if current() {
			s.valid, s.start, s.end = true, next, next
			end, valid = next, true
			s.broadcast()
		}
		h.mu.Unlock()
	}
	for end < next {
		ms, err := h.r.ListMessages(ctx, id, end, pageLimit)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			// Removed since GetSession (deleted or truncated): the next
			// read says which.
			h.signalSession(id)
			return nil
		}
		h.mu.Lock()
		if !current() {
			h.mu.Unlock()
			return nil
		}
		if ms[0].Sequence != end {
			// Sequences before the first stored one were truncated:
			// restart the ring there; tails before it read the store,
			// which reports the truncated range.
			s.msgs, s.bytes, s.start = nil, 0, ms[0].Sequence
		}
		s.add(ms, h.cfg.SessionRingBytes)
		end = s.end
		h.mu.Unlock()
	}
	if sess.GetState() == sessionv1.SessionState_SESSION_STATE_CLOSED {
		h.mu.Lock()
		if current() {
			s.ended = feedv1.SessionEnded_REASON_CLOSED
			s.broadcast()
		}
		h.mu.Unlock()
	}
	return nil
}

// signalSession marks a tailed session for another read.
func (h *Hub) signalSession(id string) {
	h.mu.Lock()
	if h.sessions[id] != nil {
		h.dirty[id] = true
	}
	h.mu.Unlock()
	h.signal()
}

// SessionTail is one subscriber of a session's messages. Next is not safe
// for concurrent use; Close may be called from any goroutine.
type SessionTail struct {
	h    *Hub
	id   string
	ring *sessionRing
	// next is the cursor: the sequence of the next message to deliver.
	next   int64
	ended  bool
	closed atomic.Bool
	// gen is the ring's rewind count as of what the tail delivered;
	// undo, what the last Next's Rewound moved (rewound.go).
	gen  uint64
	undo *tailUndo
}

// TailSession subscribes to a session's messages: those with sequence >=
// req.FromSequence (or, with FromNow, committed after this call) in
// sequence order, then each new one as it commits. NOT_FOUND when the
// session does not exist. Close the tail when done.
func (h *Hub) TailSession(ctx context.Context, req *feedv1.TailSessionRequest) (*SessionTail, error) {
	id := req.GetSessionId()
	if err := ids.Check("session_id", id); err != nil {
		return nil, err
	}
	sess, err := h.r.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	from := req.GetFromSequence()
	switch {
	case req.GetFromNow():
		from = sess.GetMessageCount()
	case from < 0:
		return nil, errs.InvalidArgument("from_sequence %d is negative", from)
	case from > sess.GetMessageCount():
		return nil, errs.InvalidArgument("from_sequence %d is past the session's next sequence %d", from, sess.GetMessageCount())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.register(); err != nil {
		return nil, err
	}
	r := h.sessions[id]
	if r == nil {
		r = &sessionRing{changed: make(chan struct{})}
		h.sessions[id] = r
		h.dirty[id] = true
		h.signal()
	}
	r.tails++
	return &SessionTail{h: h, id: id, ring: r, next: from, gen: r.gen}, nil
}

// Sequence is the tail's cursor: the next sequence it would deliver.
func (t *SessionTail) Sequence() int64 { return t.next }

// Rewind moves the cursor back to seq, a Sequence the tail had before: the
// events Next returned since are returned again, in order. A sender that
// has no room to hold a page it read (the gRPC feed streams, under their
// byte budget) drops it and rewinds instead of holding it while it waits.
// A seq past the cursor is ignored, unless it is the cursor a Rewound
// event of the last Next moved: then that event is returned again.
func (t *SessionTail) Rewind(seq int64) {
	if u := t.undo; u != nil && seq == u.next && seq > t.next {
		t.next, t.gen, t.ended, t.undo = u.next, u.gen, false, nil
		return
	}
	if seq <= t.next {
		t.next, t.ended = seq, false
	}
}

// Next returns the next events, at least one: messages in sequence order,
// a Truncated marker for sequences removed before they were read, a
// Rewound event (alone) when messages it returned were removed by a
// replacement, and finally SessionEnded (closed, deleted, or the node stopping). After that
// (or after Close) it returns io.EOF. It waits for new messages until ctx
// ends.
func (t *SessionTail) Next(ctx context.Context) ([]*feedv1.SessionEvent, error) {
	h, r := t.h, t.ring
	t.undo = nil
	for {
		if t.ended || t.closed.Load() {
			return nil, io.EOF
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h.mu.Lock()
		if out := t.rewound(); out != nil {
			h.mu.Unlock()
			return out, nil
		}
		if r.valid && t.next >= r.start {
			if t.next < r.end {
				out := t.fromRing()
				h.mu.Unlock()
				return out, nil
			}
			var reason feedv1.SessionEnded_Reason
			switch {
			case r.ended != 0:
				reason = r.ended
			case h.closed:
				reason = feedv1.SessionEnded_REASON_NODE_STOPPING
			}
			if reason != 0 {
				h.mu.Unlock()
				return t.end(reason), nil
			}
			r.waiting++
			stale, changed := h.dirty[t.id], r.changed
			h.mu.Unlock()
			if err := h.waitRing(ctx, changed, stale, func() { r.waiting-- }); err != nil {
				return nil, err
			}
			continue
		}
		valid, start, ended, closed, changed, gen := r.valid, r.start, r.ended, h.closed, r.changed, r.gen
		h.mu.Unlock()
		// Behind the ring (or no ring yet): read the store.
		ms, err := h.r.ListMessages(ctx, t.id, t.next, pageLimit)
		if err != nil {
			return nil, err
		}
		h.mu.Lock()
		crossed := r.gen != gen
		h.mu.Unlock()
		if crossed {
			// A rewind came while the store was read: look again.
			continue
		}
		if len(ms) > 0 {
			var out []*feedv1.SessionEvent
			if first := ms[0].Sequence; first > t.next {
				out = append(out, truncated(t.next, first))
			}
			for _, m := range ms {
				out = append(out, &feedv1.SessionEvent{Event: &feedv1.SessionEvent_Message{Message: m}})
			}
			t.next = ms[len(ms)-1].Sequence + 1
			return out, nil
		}
		switch {
		case valid && t.next < start && ended == feedv1.SessionEnded_REASON_DELETED:
			return t.end(ended), nil
		case valid && t.next < start:
			// Nothing stored from the cursor on, yet the ring starts
			// later: the range between was truncated.
			out := []*feedv1.SessionEvent{truncated(t.next, start)}
			t.next = start
			return out, nil
		case !valid && closed:
			return t.end(feedv1.SessionEnded_REASON_NODE_STOPPING), nil
		case !valid:
			if err := h.wait(ctx, changed); err != nil {
				return nil, err
			}
		}
	}
}

// fromRing takes the messages from the cursor on (at most a page), under
// h.mu.
func (t *SessionTail) fromRing() []*feedv1.SessionEvent {
	r := t.ring
	ms := r.msgs[t.next-r.start:]
	if len(ms) > pageLimit {
		ms = ms[:pageLimit]
	}
	out := make([]*feedv1.SessionEvent, len(ms))
	for i, m := range ms {
		out[i] = &feedv1.SessionEvent{Event: &feedv1.SessionEvent_Message{Message: m}}
	}
	t.next = ms[len(ms)-1].Sequence + 1
	return out
}

func (t *SessionTail) end(reason feedv1.SessionEnded_Reason) []*feedv1.SessionEvent {
	t.ended = true
	return []*feedv1.SessionEvent{{Event: &feedv1.SessionEvent_Ended{Ended: &feedv1.SessionEnded{Reason: reason}}}}
}

func truncated(from, to int64) *feedv1.SessionEvent {
	return &feedv1.SessionEvent{Event: &feedv1.SessionEvent_Truncated{Truncated: &feedv1.Truncated{FromSequence: from, ToSequence: to}}}
}

// Close unsubscribes the tail.
func (t *SessionTail) Close() {
	if t.closed.Swap(true) {
		return
	}
	h := t.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.ring.tails--; t.ring.tails == 0 && h.sessions[t.id] == t.ring {
		delete(h.sessions, t.id)
		delete(h.dirty, t.id)
	}
	h.unregister()
}
