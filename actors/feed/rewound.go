package feed

import (
	"google.golang.org/protobuf/proto"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	"github.com/agentstate/agentstate/persistence"
)

// Replaced suffixes (issue 30). A ReplaceSuffix removes a session's
// messages from a sequence on and stores new ones there: a tail that
// delivered a removed message must say so before it delivers what took
// its place. The ring learns of each rewind at its commit (Hub.OnCommit),
// before the replacement is answered, and counts them (gen); each tail
// remembers the count as of what it delivered. A tail whose count is
// behind, and which delivered a message at or past a newer rewind's cut,
// delivers a Rewound event and resumes at the cut; one whose store read
// crossed a rewind drops the read and looks again. So a tail never goes
// on from a removed message, and delivers the new ones once. A rewind
// committed before the hub was told (an in-flight read saw it) yields a
// Rewound the tail did not strictly need, never a missing one.
//
// Invariant (under Hub.mu): rewinds holds the marks with gen > the
// oldest gen a tail of the ring may still hold, up to maxRewinds; older
// ones are folded into floor, whose cut is the lowest of them, so a tail
// that far behind rewinds at least as far as it must.

// maxRewinds bounds the marks a ring keeps.
const maxRewinds = 64

// rewindMark is one rewind the ring learned of: its count and its cut.
type rewindMark struct {
	gen      uint64
	from     int64
	previous int64
}

// rewind applies rw to the ring: the messages from rw.From on go, and
// reads in flight are discarded (readSession compares gen).
func (r *sessionRing) rewind(rw persistence.Rewind) {
	r.gen++
	r.rewinds = append(r.rewinds, rewindMark{gen: r.gen, from: rw.From, previous: rw.Previous})
	if len(r.rewinds) > maxRewinds {
		old := r.rewinds[0]
		if !r.hasFloor || old.from < r.floor.from {
			r.floor.from = old.from
		}
		r.floor.gen, r.floor.previous, r.hasFloor = old.gen, max(r.floor.previous, old.previous), true
		r.rewinds = append(r.rewinds[:0], r.rewinds[1:]...)
	}
	if r.valid && rw.From < r.end {
		if rw.From <= r.start {
			clear(r.msgs)
			r.msgs, r.bytes, r.start = nil, 0, rw.From
		} else {
			keep := rw.From - r.start
			for _, m := range r.msgs[keep:] {
				r.bytes -= proto.Size(m)
			}
			clear(r.msgs[keep:])
			r.msgs = r.msgs[:keep]
		}
		r.end = rw.From
	}
	r.broadcast()
}

// tailUndo is what a Rewound event moved, so that a sender that drops
// the page holding it (SessionTail.Rewind) gets it again.
type tailUndo struct {
	next int64
	gen  uint64
}

// rewound returns the Rewound event the tail owes, under Hub.mu: the
// lowest cut of the rewinds newer than what it delivered that are below
// its cursor. It catches the tail's count up either way.
func (t *SessionTail) rewound() []*feedv1.SessionEvent {
	r := t.ring
	if r.gen == t.gen {
		return nil
	}
	from, prev, owed := t.next, int64(0), false
	see := func(m rewindMark) {
		if m.from < from {
			from, owed = m.from, true
		}
		prev = max(prev, m.previous)
	}
	if r.hasFloor && t.gen < r.floor.gen {
		see(r.floor)
	}
	for _, m := range r.rewinds {
		if m.gen > t.gen {
			see(m)
		}
	}
	before := t.gen
	t.gen = r.gen
	if !owed {
		return nil
	}
	t.undo = &tailUndo{next: t.next, gen: before}
	t.next = from
	return []*feedv1.SessionEvent{{Event: &feedv1.SessionEvent_Rewound{Rewound: &feedv1.Rewound{
		FromSequence: from, PreviousNextSequence: max(prev, from)}}}}
}
