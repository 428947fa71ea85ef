package writer

import (
	"math"
	"time"
)

// Sharing the writer's time among principals.
//
// The backlog's shares (fairshare) bound what a principal holds; they do
// not bound the writer's time its admitted commands take. A principal whose
// few admitted commands are 3 MiB appends makes every synchronous=FULL
// transaction that carries one slow, and every other principal's commands
// wait behind it. So the queue is one FIFO lane per principal, and the
// writer measures what each principal's commands cost it: every
// transaction's Apply time is charged to the principals it carried, in
// proportion to their commands' bytes (plus laneCommandCost each). A
// principal's use is that time, decaying with laneTau: about the part of
// the writer's wall-clock time its commands took lately.
//
// While n named principals use the writer (commands queued, or charged
// within laneTau), a principal whose use exceeds 1/n is deferred as long
// as another principal under its share has commands queued or was
// answered within laneReturn (closed-loop callers come back at once: a
// transaction formed in that gap would carry only the heavy principal's
// commands, and the light one would wait behind it every time). The
// writer then holds the heavy principal's commands (the transaction
// carries the others' only, or the writer waits for the returning ones, at
// most until their return window ends or the heavy use decays to its
// share) instead of first-come, first-served. A lone principal, and the
// unapportioned lane "" (the embedding program's calls and the node's own
// audit records), are never deferred, so without contention the writer
// behaves as one FIFO queue.
//
// While several named principals use the writer, each adds to a
// transaction at most laneBatchBytes (but always its first command), so
// one principal's large commands cannot make every transaction long.
//
// Order: each lane is FIFO, and a sender's commands all go to one lane
// (an owner names the principal of the write it submits; a sender has one
// write in flight anyway), so the writer reorders across senders only.
// A flush marker is answered only after every command accepted before it
// (markers keep their acceptance sequence).
const (
	laneTau         = 500 * time.Millisecond
	laneReturn      = 10 * time.Millisecond
	laneBatchBytes  = 1 << 20
	laneCommandCost = 256
	// laneMaxIdle lanes that hold nothing are kept before they are
	// swept (principals come and go with an identities file).
	laneMaxIdle = 1024
)

// lane is one principal's pending commands and its use of the writer.
type lane struct {
	principal string
	items     []*item // FIFO
	// use is the decayed Apply time charged (ns), as of at.
	use float64
	at  int64
	// answered is when the lane's commands were last answered; seen when
	// it last had commands queued or answered (for the live set).
	answered, seen int64
	// cost is what the lane contributes to the transaction in flight.
	cost int64
	// queued: in lanes.queued; live: in lanes.live.
	queued, live bool
}

func (l *lane) decay(now int64) float64 {
	if dt := now - l.at; dt > 0 && l.use > 0 {
		l.use *= math.Exp(-float64(dt) / float64(laneTau))
	}
	l.at = now
	return l.use / float64(laneTau)
}

// lanes is the writer's queue. Invariants: queued holds the lanes with
// items, each once, in round-robin order from next; live holds the named
// lanes seen within laneTau (pruned at pick); markers are in acceptance
// order; cmds counts the items with a command in all lanes.
type lanes struct {
	byName  map[string]*lane
	queued  []*lane
	next    int
	live    []*lane
	markers []*item
	seq     uint64
	cmds    int
	// wake is how long the writer holds deferred commands when no lane may
	// go (0: nothing deferred), as decided by the last pick.
	wake time.Duration
}

func newLanes() *lanes { return &lanes{byName: map[string]*lane{}} }

func (q *lanes) empty() bool { return len(q.queued) == 0 && len(q.markers) == 0 }

// push queues it at the back of its principal's lane (a flush marker:
// after everything queued).
func (q *lanes) push(it *item, now int64) {
	q.seq++
	it.seq = q.seq
	if it.cmd == nil {
		q.markers = append(q.markers, it)
		return
	}
	l := q.lane(it.lane, now)
	it.from = l
	l.items = append(l.items, it)
	q.cmds++
	q.enqueue(l, now)
}

// requeue puts rolled-back async records back at the front of their lanes,
// ahead of everything accepted after them (their sequence is older).
func (q *lanes) requeue(its []*item, now int64) {
	for i := len(its) - 1; i >= 0; i-- {
		it := its[i]
		l := q.lane(it.lane, now)
		it.from = l
		l.items = append(l.items, nil)
		copy(l.items[1:], l.items)
		l.items[0] = it
		q.cmds++
		q.enqueue(l, now)
	}
}

func (q *lanes) lane(principal string, now int64) *lane {
	l := q.byName[principal]
	if l == nil {
		if len(q.byName) >= laneMaxIdle {
			q.sweep()
		}
		l = &lane{principal: principal, at: now}
		q.byName[principal] = l
	}
	return l
}

func (q *lanes) enqueue(l *lane, now int64) {
	l.seen = now
	if !l.queued {
		l.queued = true
		q.queued = append(q.queued, l)
	}
	if !l.live && l.principal != "" {
		l.live = true
		q.live = append(q.live, l)
	}
}

// sweep forgets the lanes that hold nothing and are not live.
func (q *lanes) sweep() {
	for name, l := range q.byName {
		if !l.queued && !l.live {
			delete(q.byName, name)
		}
	}
}

// pick moves the commands of the next transaction into batch, up to
// maxCmds commands and maxBytes bytes (a first command larger than
// maxBytes goes alone), followed by the flush markers that nothing queued
// precedes. It returns the batch, its commands and bytes. When commands
// are queued but every lane holding them is deferred, it takes none and
// sets q.wake.
func (q *lanes) pick(batch []*item, now int64, maxCmds, maxBytes int) ([]*item, int, int) {
	q.wake = 0
	n, bytes := 0, 0
	share := q.share(now)
	contended := share < 1
	full := false
	for range len(q.queued) {
		if full || len(q.queued) == 0 {
			break
		}
		if q.next >= len(q.queued) {
			q.next = 0
		}
		l := q.queued[q.next]
		if q.deferred(l, share, now) {
			q.next++
			continue
		}
		laneBytes := 0
		for len(l.items) > 0 {
			it := l.items[0]
			if n > 0 && (n >= maxCmds || bytes+it.size > maxBytes) {
				full = true
				break
			}
			if contended && laneBytes > 0 && laneBytes+it.size > laneBatchBytes {
				break
			}
			n++
			bytes += it.size
			laneBytes += it.size
			l.cost += int64(it.size) + laneCommandCost
			batch = append(batch, it)
			l.items[0] = nil
			l.items = l.items[1:]
		}
		if len(l.items) == 0 {
			l.items = l.items[:0]
			l.queued = false
			q.queued = append(q.queued[:q.next], q.queued[q.next+1:]...)
		} else {
			q.next++
		}
	}
	q.cmds -= n
	if n == 0 && q.cmds > 0 {
		q.wake = q.holdFor(share, now)
	}
	// Flush markers go once nothing accepted before them is queued.
	first := uint64(math.MaxUint64)
	for _, l := range q.queued {
		first = min(first, l.items[0].seq)
	}
	k := 0
	for k < len(q.markers) && q.markers[k].seq < first {
		batch = append(batch, q.markers[k])
		q.markers[k] = nil
		k++
	}
	if k > 0 {
		q.markers = append(q.markers[:0], q.markers[k:]...)
	}
	return batch, n, bytes
}

// share is each live named lane's share of the writer now (1: at most one
// lane is live), after pruning the lanes not seen within laneTau.
func (q *lanes) share(now int64) float64 {
	for i := 0; i < len(q.live); {
		l := q.live[i]
		if !l.queued && now-l.seen > int64(laneTau) {
			l.live = false
			q.live = append(q.live[:i], q.live[i+1:]...)
			continue
		}
		l.decay(now)
		i++
	}
	return 1 / float64(max(len(q.live), 1))
}

// deferred reports whether l's commands wait: a named lane over its share
// while another live lane under it has commands queued or was just
// answered.
func (q *lanes) deferred(l *lane, share float64, now int64) bool {
	if share >= 1 || l.principal == "" || l.use/float64(laneTau) <= share {
		return false
	}
	for _, o := range q.live {
		if o != l && o.use/float64(laneTau) < share && (o.queued || now-o.answered < int64(laneReturn)) {
			return true
		}
	}
	return false
}

// holdFor is how long to hold when every queued lane is deferred: until
// the first under-share lane's return window ends or the first deferred
// lane's use decays to its share, at least minCommitWindow.
func (q *lanes) holdFor(share float64, now int64) time.Duration {
	d := laneReturn
	for _, o := range q.live {
		u := o.use / float64(laneTau)
		if u < share && !o.queued {
			d = min(d, time.Duration(o.answered+int64(laneReturn)-now))
		}
		if u > share && o.queued {
			d = min(d, time.Duration(float64(laneTau)*math.Log(u/share)))
		}
	}
	return max(d, minCommitWindow)
}

// charge shares a committed (or rolled-back) transaction's Apply time dur
// among the lanes of batch, by their cost in it, and marks them answered.
func (q *lanes) charge(batch []*item, dur time.Duration, now int64) {
	var total int64
	for _, it := range batch {
		if l := it.from; l != nil && l.cost > 0 {
			total += l.cost
			l.answered = -l.cost // marks the lane counted; restored below
			l.cost = 0
		}
	}
	if total == 0 {
		return
	}
	for _, it := range batch {
		if l := it.from; l != nil && l.answered < 0 {
			l.decay(now)
			l.use += float64(dur) * float64(-l.answered) / float64(total)
			l.answered, l.seen = now, now
		}
	}
}

// drainAll removes and returns every queued item (lanes, then markers).
func (q *lanes) drainAll() []*item {
	var all []*item
	for _, l := range q.queued {
		all = append(all, l.items...)
		l.items, l.queued = l.items[:0], false
	}
	q.queued, q.next, q.cmds = q.queued[:0], 0, 0
	all = append(all, q.markers...)
	q.markers = nil
	return all
}
