package writer

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
)

// item is one unit of pending work at the writer: a command, or a flush
// marker (cmd == nil) that is answered once everything queued before it
// has been answered.
//
// Invariant: every item is answered exactly once, with the outcome of the
// transaction that carried it or UNAVAILABLE when the writer closed first.
// The one exception is an async record whose transaction rolled back: it
// was answered on acceptance, so it goes back to the front of the queue
// and rides in the next transaction instead.
type item struct {
	cmd  persistence.Command
	size int
	// Where the answer goes: a Submit's sender, a local waiter, or
	// nobody (async).
	sender *actor.PID
	tag    uint64
	done   chan persistence.Result // capacity 1, so answering never blocks
	async  bool
	// record marks a stand-alone RecordAudit of one entry made by
	// Record; all records of one batch are merged into one command.
	// clientID marks one whose event id the client chose (a
	// RecordClientAudit of one entry): those are merged into a command of
	// their own, whose per-entry outcomes go back to their items.
	record   bool
	clientID bool
	// slot is the backlog slot the item holds until it is answered,
	// taken as principal.
	slot      *Backlog
	principal string
}

// Messages the writer actor receives besides *Submit.
type (
	local   struct{ it *item }
	resume  struct{}
	drain   struct{}
	abandon struct{}
	applied struct {
		batch    []*item
		idx      []int // idx[i]: the command of batch[i] in results; -1 for a marker
		sub      []int // sub[i]: a clientID record's entry within its command
		results  []persistence.Result
		err      error
		dur      time.Duration
		commands int
		bytes    int
	}
)

// committer is the writer actor. It alone holds the persistence.Writer.
//
// Invariants: at most one Apply runs at a time (inflight), on the
// transaction goroutine (txs), so the actor keeps receiving and the next
// batch forms while a transaction runs; queue is in acceptance order,
// except that rolled-back async records are put back in front, ahead of
// everything accepted after them; once closed, the Writer has been
// released, txs is closed and the Writer is never used again.
type committer struct {
	svc *Writer
	w   persistence.Writer
	cfg Config
	log *slog.Logger

	// txs feeds the one long-lived goroutine that runs Apply (started
	// with the first batch). One goroutine rather than one per
	// transaction: each transaction descends deep into database/sql and
	// SQLite, and a fresh goroutine regrows its stack every time (13–20%
	// of the CPU in profiles of the append path). Capacity 1 and at most
	// one transaction in flight: handing a batch over never blocks.
	txs chan *tx

	queue     []*item
	cmds      int // items in queue with a command (not flush markers)
	win       window
	inflight  bool
	pausing   bool // a backoff timer will send resume
	backoff   time.Duration
	draining  bool
	abandoned bool
	closed    bool
	lost      int // async records given up on at close or by a command-level error
}

func (w *committer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Submit:
		it := &item{cmd: m.Cmd, tag: m.Tag, sender: ctx.Sender()}
		if m.Cmd == nil {
			w.answer(ctx, it, persistence.Result{Err: errs.InvalidArgument("writer.Submit without a command")})
			return
		}
		it.size = m.Cmd.Size()
		w.accept(ctx, it)
	case *local:
		w.accept(ctx, m.it)
	case *applied:
		w.finish(ctx, m)
	case *windowClosed:
		w.closeWindow(ctx, m)
	case *resume:
		w.pausing = false
		w.kick(ctx)
	case *drain:
		w.draining = true
		w.kick(ctx)
	case *abandon:
		w.abandoned = true
		w.kick(ctx)
	}
}

func (w *committer) accept(ctx actor.Context, it *item) {
	// The Service hands over nothing after it marked itself closed, and
	// drain is sent only after that mark, so only Submits of other actors
	// can arrive here once draining began: they are refused.
	if w.draining || w.closed {
		w.answer(ctx, it, persistence.Result{Err: errs.Unavailable("the writer is stopping")})
		return
	}
	w.queue = append(w.queue, it)
	if it.cmd != nil {
		w.cmds++
	}
	w.kick(ctx)
}

// kick starts the next batch when none runs, or closes the writer once a
// drain has emptied the queue (or was abandoned).
func (w *committer) kick(ctx actor.Context) {
	if w.inflight || w.closed {
		return
	}
	if w.abandoned {
		w.close(ctx)
		return
	}
	if w.pausing {
		return
	}
	for len(w.queue) > 0 && !w.inflight {
		if w.hold(ctx) {
			return
		}
		w.start(ctx)
	}
	if !w.inflight && len(w.queue) == 0 && w.draining {
		w.close(ctx)
	}
}

// start takes the pending items in order, up to the batch bounds, and
// applies their commands in one transaction on the transaction goroutine.
func (w *committer) start(ctx actor.Context) {
	n, bytes := 0, 0
	var batch []*item
	for len(w.queue) > 0 {
		it := w.queue[0]
		if it.cmd != nil {
			if n > 0 && (n >= w.cfg.MaxBatchCommands || bytes+it.size > w.cfg.MaxBatchBytes) {
				break
			}
			n++
			bytes += it.size
		}
		batch = append(batch, it)
		w.queue[0] = nil
		w.queue = w.queue[1:]
	}
	w.cmds -= n
	if n == 0 { // only flush markers, with nothing left before them
		for _, it := range batch {
			w.answer(ctx, it, persistence.Result{})
		}
		return
	}
	cmds, idx, sub := commands(batch)
	w.inflight = true
	if w.txs == nil {
		w.txs = make(chan *tx, 1)
		go runTxs(w.txs, w.w, w.cfg.OnCommit, ctx.ActorSystem().Root, ctx.Self())
	}
	w.txs <- &tx{cmds: cmds, done: applied{batch: batch, idx: idx, sub: sub, commands: n, bytes: bytes}}
}

// tx is one transaction for the transaction goroutine: its commands, and
// the applied message to complete and send back.
type tx struct {
	cmds []persistence.Command
	done applied
}

// runTxs applies each transaction it receives and reports it to the actor
// at self, until txs is closed.
func runTxs(txs <-chan *tx, pw persistence.Writer, onCommit func([]persistence.Command, []persistence.Result), root *actor.RootContext, self *actor.PID) {
	for t := range txs {
		start := time.Now()
		t.done.results, t.done.err = pw.Apply(context.Background(), t.cmds)
		t.done.dur = time.Since(start)
		if t.done.err == nil && onCommit != nil {
			onCommit(t.cmds, t.done.results)
		}
		root.Send(self, &t.done)
	}
}

// commands turns a batch into the commands of one transaction. The
// stand-alone records are merged into one RecordAudit at the place of the
// first, which saves a savepoint per entry; they are independent and
// already validated, so none can fail on its own. Records with client
// event ids are merged likewise into one RecordClientAudit, whose entries
// the store decides one by one (stored, duplicate, conflict); sub says
// which entry is whose.
func commands(batch []*item) ([]persistence.Command, []int, []int) {
	cmds := make([]persistence.Command, 0, len(batch))
	idx := make([]int, len(batch))
	var sub []int
	var merged *persistence.RecordAudit
	var mergedClient *persistence.RecordClientAudit
	at, atClient := -1, -1
	for i, it := range batch {
		switch {
		case it.cmd == nil:
			idx[i] = -1
		case it.clientID:
			if mergedClient == nil {
				mergedClient = &persistence.RecordClientAudit{}
				atClient = len(cmds)
				cmds = append(cmds, mergedClient)
				sub = make([]int, len(batch))
			}
			sub[i] = len(mergedClient.Entries)
			mergedClient.Entries = append(mergedClient.Entries, it.cmd.Touches().Records...)
			idx[i] = atClient
		case it.record:
			if merged == nil {
				merged = &persistence.RecordAudit{}
				at = len(cmds)
				cmds = append(cmds, merged)
			}
			merged.Entries = append(merged.Entries, it.cmd.Touches().Records...)
			idx[i] = at
		default:
			idx[i] = len(cmds)
			cmds = append(cmds, it.cmd)
		}
	}
	return cmds, idx, sub
}

// clientOutcome is the Result for the clientID record batch[i] of m: its
// own entry's outcome out of the merged command's.
func clientOutcome(m *applied, i int, r persistence.Result) persistence.Result {
	if r.Err != nil {
		return r
	}
	// The merged command is a RecordClientAudit too; its outcome type is
	// all ResultOf needs.
	var merged *persistence.RecordClientAudit
	all := merged.ResultOf(r).Recorded
	if m.sub[i] >= len(all) { // the store broke its contract; the batch did commit
		return persistence.Result{Err: errs.Internal("store returned %d audit outcomes for entry %d", len(all), m.sub[i])}
	}
	rec := all[m.sub[i]]
	out := persistence.RecordedResult{Recorded: []persistence.RecordedAudit{rec}}.Result()
	out.Err = rec.Err
	return out
}

func (w *committer) finish(ctx actor.Context, m *applied) {
	w.inflight = false
	if o := w.cfg.Observer; o != nil {
		o.BatchCommitted(m.commands, m.bytes, m.dur, m.err)
	}
	if m.err == nil {
		w.backoff = w.cfg.RetryBackoff
		w.win.committed(m.commands, m.bytes, w.cmds, m.dur)
		for i, it := range m.batch {
			var r persistence.Result
			switch {
			case m.idx[i] < 0:
			case m.idx[i] < len(m.results) && it.clientID:
				r = clientOutcome(m, i, m.results[m.idx[i]])
			case m.idx[i] < len(m.results):
				r = m.results[m.idx[i]]
			default: // the store broke its contract; the batch did commit
				r.Err = errs.Internal("store returned %d results for %d commands", len(m.results), m.idx[i]+1)
			}
			w.answer(ctx, it, r)
		}
		w.kick(ctx)
		return
	}
	err := txError(m.err)
	w.win.failed()
	var retry []*item
	for _, it := range m.batch {
		if it.async {
			retry = append(retry, it)
			continue
		}
		w.answer(ctx, it, persistence.Result{Err: err})
	}
	if len(retry) > 0 {
		w.queue = append(retry, w.queue...)
		w.cmds += len(retry)
		if o := w.cfg.Observer; o != nil {
			o.AsyncRetried(len(retry), err)
		}
	}
	w.log.Warn("transaction rolled back", "commands", m.commands, "async_requeued", len(retry),
		"retry_in", w.backoff, "err", err)
	w.pausing = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(w.backoff, func() { root.Send(self, &resume{}) })
	w.backoff = min(2*w.backoff, MaxRetryBackoff)
	w.kick(ctx)
}

// answer delivers it's outcome and frees its backlog slot.
func (w *committer) answer(ctx actor.Context, it *item, r persistence.Result) {
	switch {
	case it.async:
		if r.Err != nil {
			w.lost++
			w.log.Error("accepted async audit record was not stored", "err", r.Err)
			if o := w.cfg.Observer; o != nil {
				o.AsyncLost(1, r.Err)
			}
		}
	case it.sender != nil:
		ctx.Send(it.sender, &Applied{Tag: it.tag, Result: r})
	case it.done != nil:
		it.done <- r
	}
	if it.slot != nil {
		it.slot.ReleaseAs(it.principal, it.size)
	}
}

// close answers what is still queued with UNAVAILABLE (losing the async
// records among it, which only an abandoned drain leaves), releases the
// Writer and tells Stop.
func (w *committer) close(ctx actor.Context) {
	gone := errs.Unavailable("the writer stopped before this command was committed")
	for _, it := range w.queue {
		w.answer(ctx, it, persistence.Result{Err: gone})
	}
	w.queue = nil
	w.cmds = 0
	w.closed = true
	if w.txs != nil {
		close(w.txs) // nothing is in flight: kick closes only when idle
	}
	w.w.Release()
	w.svc.closed(w.lost)
}

// txError types a transaction-level failure; the store's own *errs.Error
// (RESOURCE_EXHAUSTED, UNAVAILABLE, INTERNAL) keeps its code.
func txError(err error) error {
	e := errs.From(err)
	return &errs.Error{Code: e.Code, Msg: "transaction rolled back, nothing of it stored: " + e.Msg}
}
