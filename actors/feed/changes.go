package feed

import (
	"context"
	"io"
	"sort"
	"sync/atomic"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
)

// pageLimit is the most entries or messages one store read returns.
const pageLimit = 1000

// maxCatchUp is the most entries or messages the hub reads to bring a
// stale ring up to date; past that it restarts the ring at the head.
const maxCatchUp = 4 * pageLimit

// changeRing is the recent audit trail: every entry with start < position
// <= end, in commit order (valid once the hub read the head).
type changeRing struct {
	valid      bool
	start, end int64
	entries    []*auditv1.AuditEntry
	bytes      int
	tails      int // registered change tails; the hub reads only for them
	waiting    int // tails waiting at the ring's end for it to grow
	changed    chan struct{}
}

func (r *changeRing) broadcast() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// add appends entries (the next ones after end, in order) and cuts the
// ring's start until it fits in limit bytes (keeping at least the new
// page, so a tail that is live finds them).
func (r *changeRing) add(es []*auditv1.AuditEntry, head int64, limit int) {
	for _, e := range es {
		r.entries = append(r.entries, e)
		r.bytes += proto.Size(e)
	}
	r.end = head
	cut := 0
	for r.bytes > limit && len(r.entries)-cut > len(es) {
		r.bytes -= proto.Size(r.entries[cut])
		r.start = r.entries[cut].Position
		r.entries[cut] = nil
		cut++
	}
	if cut > 0 {
		r.entries = append([]*auditv1.AuditEntry(nil), r.entries[cut:]...)
	}
	r.broadcast()
}

// readChanges reads the entries committed after the ring's end.
func (h *Hub) readChanges(ctx context.Context) error {
	anchor, head, err := h.r.AuditBounds(ctx)
	if err != nil {
		return err
	}
	h.mu.Lock()
	if !h.changes.valid || h.changes.end < anchor || head-h.changes.end > maxCatchUp {
		// First read, the ring fell behind a prune, or it is so stale
		// (nobody waited on it for long) that reading the range into it
		// would only evict it again: start it at the head; tails before
		// it read the store.
		h.changes = changeRing{valid: true, start: head, end: head, tails: h.changes.tails,
			waiting: h.changes.waiting, changed: h.changes.changed}
		h.changes.broadcast()
		h.mu.Unlock()
		return nil
	}
	end := h.changes.end
	h.mu.Unlock()
	for end < head {
		es, err := h.r.FeedAudit(ctx, nil, end, head, pageLimit)
		if err != nil {
			return err
		}
		upto := head
		if len(es) == pageLimit {
			upto = es[len(es)-1].Position
		}
		h.mu.Lock()
		if !h.changes.valid || h.changes.end != end {
			// Its last tail left and the ring was freed meanwhile.
			h.mu.Unlock()
			return nil
		}
		h.changes.add(es, upto, h.cfg.ChangeRingBytes)
		h.mu.Unlock()
		end = upto
	}
	return nil
}

// ChangeTail is one subscriber of the change feed. Next is not safe for
// concurrent use; Close may be called from any goroutine, once.
type ChangeTail struct {
	h      *Hub
	filter *persistence.FeedFilter
	// after is the cursor: every entry up to this position was delivered
	// (or did not match).
	after  int64
	ended  bool
	closed atomic.Bool
}

// MaxFilterEventTypes bounds the event types of one change filter: each
// is a value the store's query binds, and the registry holds a few dozen,
// so a longer list is a mistake or an attack (100,000 of them exceeded
// SQLite's bound variables and answered INTERNAL).
const MaxFilterEventTypes = 100

// FilterOf converts the wire filter; an unknown event type is not refused
// (the trail's types grow; an old one may be stored), an empty one is, and
// so is a list longer than MaxFilterEventTypes (INVALID_ARGUMENT).
func FilterOf(f *feedv1.ChangeFilter) (*persistence.FeedFilter, error) {
	if n := len(f.GetEventTypes()); n > MaxFilterEventTypes {
		return nil, errs.InvalidArgument("change filter: %d event types; at most %d", n, MaxFilterEventTypes)
	}
	for _, t := range f.GetEventTypes() {
		if t == "" {
			return nil, errs.InvalidArgument("change filter: an empty event type")
		}
	}
	return &persistence.FeedFilter{EventTypes: f.GetEventTypes(), SessionID: f.GetSessionId(),
		PlanID: f.GetPlanId(), ActorName: f.GetActorName(), Principal: f.GetPrincipal(), Namespace: f.GetNamespace()}, nil
}

// TailChanges subscribes to the change feed: entries with position >
// req.AfterPosition (or, with FromNow, committed after this call) that
// match req.Filter, in commit order. Close the tail when done.
func (h *Hub) TailChanges(ctx context.Context, req *feedv1.TailChangesRequest) (*ChangeTail, error) {
	if req.GetAfterPosition() < 0 {
		return nil, errs.InvalidArgument("after_position %d is negative", req.GetAfterPosition())
	}
	f, err := FilterOf(req.GetFilter())
	if err != nil {
		return nil, err
	}
	_, head, err := h.r.AuditBounds(ctx)
	if err != nil {
		return nil, err
	}
	after := req.GetAfterPosition()
	switch {
	case req.GetFromNow():
		after = head
	case after > head:
		return nil, errs.InvalidArgument("after_position %d is past the last committed position %d", after, head)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.register(); err != nil {
		return nil, err
	}
	h.changes.tails++
	if !h.changes.valid {
		h.signal()
	}
	return &ChangeTail{h: h, filter: f, after: after}, nil
}

// Position is the tail's cursor: resume after it.
func (t *ChangeTail) Position() int64 { return t.after }

// Rewind moves the cursor back to after, a Position the tail had before,
// as SessionTail.Rewind.
func (t *ChangeTail) Rewind(after int64) {
	if after <= t.after {
		t.after, t.ended = after, false
	}
}

// Next returns the next events, at least one: matching entries in commit
// order, a Pruned marker when entries after the cursor were pruned before
// they were read, or a final ChangesEnded when the hub closed. After that
// (or after Close) it returns io.EOF. It waits for new commits until ctx
// ends.
func (t *ChangeTail) Next(ctx context.Context) ([]*feedv1.ChangeEvent, error) {
	h := t.h
	for {
		if t.ended || t.closed.Load() {
			return nil, io.EOF
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h.mu.Lock()
		ring := &h.changes
		if ring.valid && t.after >= ring.start {
			if t.after < ring.end {
				out := t.fromRing(ring)
				h.mu.Unlock()
				if len(out) > 0 {
					return out, nil
				}
				continue
			}
			if h.closed {
				h.mu.Unlock()
				t.ended = true
				return []*feedv1.ChangeEvent{{Event: &feedv1.ChangeEvent_Ended{Ended: &feedv1.ChangesEnded{}}}}, nil
			}
			ring.waiting++
			stale, changed := h.audit, ring.changed
			h.mu.Unlock()
			err := h.waitRing(ctx, changed, stale, func() { h.changes.waiting-- })
			if err != nil {
				return nil, err
			}
			continue
		}
		// Behind the ring (or no ring yet): read the store.
		closed := h.closed
		h.mu.Unlock()
		out, caughtUp, err := t.fromStore(ctx)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 {
			return out, nil
		}
		if caughtUp && closed {
			t.ended = true
			return []*feedv1.ChangeEvent{{Event: &feedv1.ChangeEvent_Ended{Ended: &feedv1.ChangesEnded{}}}}, nil
		}
		if caughtUp {
			// At the store's head but the ring is not there yet: wait
			// for the hub's next read.
			h.mu.Lock()
			changed := h.changes.changed
			behind := !h.changes.valid || h.changes.end <= t.after
			if behind {
				h.changes.waiting++
			}
			stale := h.audit
			h.mu.Unlock()
			if behind {
				if err := h.waitRing(ctx, changed, stale, func() { h.changes.waiting-- }); err != nil {
					return nil, err
				}
			}
		}
	}
}

// fromRing takes the matching entries after the cursor from the ring (at
// most one page), under h.mu.
func (t *ChangeTail) fromRing(r *changeRing) []*feedv1.ChangeEvent {
	i := sort.Search(len(r.entries), func(i int) bool { return r.entries[i].Position > t.after })
	var out []*feedv1.ChangeEvent
	n := 0
	for ; i < len(r.entries) && n < pageLimit; i++ {
		e := r.entries[i]
		n++
		t.after = e.Position
		if t.filter.Matches(e) {
			out = append(out, &feedv1.ChangeEvent{Event: &feedv1.ChangeEvent_Entry{Entry: e}})
		}
	}
	if i == len(r.entries) {
		t.after = r.end
	}
	return out
}

// fromStore reads one page after the cursor from the store. caughtUp
// reports that the cursor reached the store's head.
func (t *ChangeTail) fromStore(ctx context.Context) ([]*feedv1.ChangeEvent, bool, error) {
	r := t.h.r
	anchor, head, err := r.AuditBounds(ctx)
	if err != nil {
		return nil, false, err
	}
	var out []*feedv1.ChangeEvent
	if t.after < anchor {
		out = append(out, pruned(t.after, anchor))
		t.after = anchor
		return out, false, nil
	}
	if t.after >= head {
		return nil, true, nil
	}
	es, err := r.FeedAudit(ctx, t.filter, t.after, head, pageLimit)
	if err != nil {
		return nil, false, err
	}
	// A prune that committed between the two reads may have removed
	// entries of the range unseen: say so rather than skip them.
	if anchor2, _, err := r.AuditBounds(ctx); err != nil {
		return nil, false, err
	} else if anchor2 > t.after {
		out = append(out, pruned(t.after, anchor2))
		t.after = anchor2
		return out, false, nil
	}
	upto := head
	if len(es) == pageLimit {
		upto = es[len(es)-1].Position
	}
	for _, e := range es {
		out = append(out, &feedv1.ChangeEvent{Event: &feedv1.ChangeEvent_Entry{Entry: e}})
	}
	t.after = upto
	return out, upto == head, nil
}

func pruned(after, to int64) *feedv1.ChangeEvent {
	return &feedv1.ChangeEvent{Event: &feedv1.ChangeEvent_Pruned{Pruned: &feedv1.Pruned{AfterPosition: after, ToPosition: to}}}
}

// Close unsubscribes the tail.
func (t *ChangeTail) Close() {
	h := t.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.closed.Swap(true) {
		return
	}
	h.changes.tails--
	if h.changes.tails == 0 {
		// Nobody reads it: free it; the next tail starts a new one.
		h.changes = changeRing{changed: h.changes.changed}
		h.changes.broadcast()
	}
	h.unregister()
}

// waitRing waits on a ring a tail counted itself waiting on (done, run
// under mu, uncounts it): it first wakes the hub when the ring is stale,
// since the hub brings up to date only the rings somebody waits on.
func (h *Hub) waitRing(ctx context.Context, changed <-chan struct{}, stale bool, done func()) error {
	if stale {
		h.signal()
	}
	err := h.wait(ctx, changed)
	h.mu.Lock()
	done()
	h.mu.Unlock()
	return err
}

// wait blocks until changed is closed, ctx ends or Close gave up on the
// tails.
func (h *Hub) wait(ctx context.Context, changed <-chan struct{}) error {
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-h.kill:
		return errs.Unavailable("the node stopped before this feed was read to its end")
	}
}
