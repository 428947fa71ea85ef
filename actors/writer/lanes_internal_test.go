package writer

import (
	"testing"
	"time"

	"github.com/agentstate/agentstate/persistence"
)

func laneItem(principal string, size int) *item {
	return &item{cmd: &persistence.RecordAudit{}, size: size, lane: principal}
}

const ms = int64(time.Millisecond)

// A lone principal is never deferred, however much of the writer it used:
// the lanes are one FIFO queue without contention.
func TestLanesLonePrincipalIsFIFO(t *testing.T) {
	q := newLanes()
	a, b := laneItem("p", 10), laneItem("p", 20)
	q.push(a, 0)
	q.push(b, 0)
	batch, n, bytes := q.pick(nil, 0, 100, 1<<20)
	if n != 2 || bytes != 30 || batch[0] != a || batch[1] != b {
		t.Fatalf("pick = %v, %d, %d; want a, b in order", batch, n, bytes)
	}
	q.charge(batch, time.Second, ms) // all of the writer's time
	q.push(laneItem("p", 1), 2*ms)
	if _, n, _ := q.pick(nil, 2*ms, 100, 1<<20); n != 1 || q.wake != 0 {
		t.Fatalf("a lone principal was deferred (n=%d, wake=%v)", n, q.wake)
	}
}

// A principal over its share of the writer's time waits while another,
// under its share, has commands queued or was just answered (it comes
// back at once); once that one's return window ends, the heavy one goes.
func TestLanesDeferHeavyPrincipal(t *testing.T) {
	q := newLanes()
	heavy, light := laneItem("hostile", 3<<20), laneItem("honest", 100)
	q.push(heavy, 0)
	q.push(light, 0)
	batch, n, _ := q.pick(nil, 0, 100, 8<<20)
	if n != 2 {
		t.Fatalf("first pick took %d commands, want both", n)
	}
	// The transaction took 400 ms, nearly all of it the 3 MiB command's.
	q.charge(batch, 400*time.Millisecond, 400*ms)

	q.push(laneItem("hostile", 3<<20), 401*ms)
	if _, n, _ := q.pick(nil, 401*ms, 100, 8<<20); n != 0 || q.wake <= 0 || q.wake > laneReturn {
		t.Fatalf("heavy principal went while the light one was returning (n=%d, wake=%v)", n, q.wake)
	}
	l := laneItem("honest", 100)
	q.push(l, 402*ms)
	batch, n, _ = q.pick(nil, 402*ms, 100, 8<<20)
	if n != 1 || batch[0] != l {
		t.Fatalf("pick = %v; want the light principal's command alone", batch)
	}
	q.charge(batch, time.Millisecond, 403*ms)
	// The light principal does not come back within laneReturn.
	if _, n, _ := q.pick(nil, 403*ms+int64(laneReturn), 100, 8<<20); n != 1 {
		t.Fatalf("heavy principal still deferred after the light one's return window (n=%d)", n)
	}
}

// Under contention one principal adds at most laneBatchBytes to a
// transaction (but always its first command); the others' ride along.
func TestLanesCapPerTransaction(t *testing.T) {
	q := newLanes()
	q.push(laneItem("a", 10), 0)
	q.push(laneItem("b", 10), 0) // b is live: a is contended
	for range 3 {
		q.push(laneItem("a", 600<<10), 0)
	}
	batch, n, bytes := q.pick(nil, 0, 100, 8<<20)
	if n != 3 || bytes != 20+600<<10 {
		t.Fatalf("pick took %d commands, %d bytes; want a's first two and b's", n, bytes)
	}
	_ = batch
	if _, n, _ := q.pick(nil, 0, 100, 8<<20); n != 1 {
		t.Fatalf("next pick took %d, want 1 (the cap again)", n)
	}
}

// A flush marker goes only once everything accepted before it has gone,
// whichever lane it is in; commands accepted after it do not hold it.
func TestLanesMarkerWaitsForEarlierCommands(t *testing.T) {
	q := newLanes()
	q.push(laneItem("a", 10), 0)
	q.push(laneItem("b", 10), 0)
	big := laneItem("a", 5<<20) // larger than a transaction: it goes alone
	q.push(big, 0)
	marker := &item{}
	q.push(marker, 0)
	later := laneItem("b", 10)
	q.push(later, 0)
	var order []*item
	for range 5 {
		batch, _, _ := q.pick(nil, 0, 100, 4<<20)
		order = append(order, batch...)
	}
	at := map[*item]int{}
	for i, it := range order {
		at[it] = i
	}
	if len(order) != 5 || at[marker] < at[big] {
		t.Fatalf("order %v: the marker went before a command accepted before it, or something is missing", order)
	}
	if !q.empty() || q.cmds != 0 {
		t.Fatalf("left queued: cmds=%d", q.cmds)
	}
}

// Rolled-back async records go back to the front of their lane.
func TestLanesRequeueAtFront(t *testing.T) {
	q := newLanes()
	a, b := laneItem("", 1), laneItem("", 2)
	q.push(a, 0)
	batch, _, _ := q.pick(nil, 0, 100, 1<<20)
	q.push(b, 0)
	q.requeue(batch, 0)
	batch, _, _ = q.pick(nil, 0, 100, 1<<20)
	if len(batch) != 2 || batch[0] != a || batch[1] != b {
		t.Fatalf("pick after requeue = %v; want a then b", batch)
	}
}
