package bench

import (
	"context"
	"slices"
	"time"
)

// verify reads every session back and fills the verification fields of
// res (see Result's invariant).
func verify(ctx context.Context, t Target, sessions []string, clients []*client, res *Result) error {
	bySession := make([][]ackedMsg, len(sessions))
	for _, c := range clients {
		for _, a := range c.acked {
			bySession[a.session] = append(bySession[a.session], a)
		}
	}
	for i, sid := range sessions {
		if sid == "" { // a new session whose create failed: nothing was appended to it
			continue
		}
		stored, err := t.ReadBack(ctx, sid)
		if err != nil {
			return err
		}
		checkSession(stored, bySession[i], res)
	}
	res.Complete = res.Missing == 0 && res.Duplicates == 0 && res.Gaps == 0 &&
		res.OutOfOrder == 0 && res.Misplaced == 0
	return nil
}

// checkSession compares one session's stored messages with what was
// acknowledged for it.
func checkSession(stored []Stored, acked []ackedMsg, res *Result) {
	res.Stored += len(stored)
	where := make(map[string]int64, len(stored))
	seqs := make([]int64, 0, len(stored))
	for _, s := range stored {
		if _, seen := where[s.ID]; seen {
			// The same message stored twice is a duplicate as well.
			res.Duplicates++
			continue
		}
		where[s.ID] = s.Seq
		seqs = append(seqs, s.Seq)
	}

	// Dense and unique: the distinct positions must be exactly 0..n-1.
	// Holes below the highest position, and positions below 0, are gaps.
	slices.Sort(seqs)
	distinct, top := 0, int64(-1)
	for i, q := range seqs {
		switch {
		case i > 0 && q == seqs[i-1]:
			res.Duplicates++
		case q < 0:
			res.Gaps++
		default:
			distinct++
			top = q
		}
	}
	res.Gaps += int(top+1) - distinct

	present := 0
	var order []placed
	for _, a := range acked {
		q, ok := where[a.id]
		if !ok {
			res.Missing++
			continue
		}
		present++
		if a.seq >= 0 && a.seq != q {
			res.Misplaced++
		}
		order = append(order, placed{start: a.start, end: a.end, pos: q})
	}
	res.OutOfOrder += ackOrderViolations(order)
	// Stored messages nobody had acknowledged: failed appends that were
	// stored anyway (the baseline's insert-then-update can do that).
	res.Unacked += len(where) - present
}

// placed is an acknowledged message: when it was sent, when it was
// answered, and where it is stored.
type placed struct {
	start, end time.Time
	pos        int64
}

// ackOrderViolations counts messages stored before a message that had been
// acknowledged before they were even sent. Acknowledgement order is the
// contract: once an append is answered, every later append of the session
// lands after it. (A client's own appends are the special case: each is
// sent after the previous one's answer.) Appends that overlap in time may
// land in either order.
func ackOrderViolations(ms []placed) int {
	byEnd := slices.Clone(ms)
	slices.SortFunc(byEnd, func(a, b placed) int { return a.end.Compare(b.end) })
	slices.SortFunc(ms, func(a, b placed) int { return a.start.Compare(b.start) })
	n, j, highest := 0, 0, int64(-1)
	for _, m := range ms {
		// highest: the furthest position of everything answered before m
		// was sent.
		for ; j < len(byEnd) && byEnd[j].end.Before(m.start); j++ {
			highest = max(highest, byEnd[j].pos)
		}
		if m.pos <= highest {
			n++
		}
	}
	return n
}
