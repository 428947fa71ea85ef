package storetest

import (
	"fmt"
	"sync"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// Pooled batches: a group commit carries the appends of many sessions in
// one Apply, and a store may pool their rows into multi-row statements of
// its own chunk sizes (SQLite: up to 256 rows; PostgreSQL: pipelined
// batches). Whatever its pooling, the contract per command is the one of a
// command applied alone: a retried turn is answered with its stored
// original, a stale command fails alone and stores nothing, and every
// other command commits with dense sequences and its audit entries chained
// in command order. These cases put the odd command in the middle of more
// rows than any one statement takes, so a store that pools across command
// boundaries must undo exactly the odd command's rows.

// poolRows is more than one multi-row statement of either store holds,
// spread over poolSessions sessions of poolTurn messages each.
const (
	poolSessions = 48
	poolTurn     = 7 // 48 × 7 = 336 rows, past a 256-row chunk
)

// poolBatch builds one single-turn append of poolTurn messages and one
// audit entry for each of sessions, starting at next[i].
func (h *harness) poolBatch(sessions []*sessionv1.Session, next []int64) ([]*persistence.AppendMessages, [][]*sessionv1.Message, []*auditv1.AuditEntry) {
	cmds := make([]*persistence.AppendMessages, len(sessions))
	msgs := make([][]*sessionv1.Message, len(sessions))
	es := make([]*auditv1.AuditEntry, len(sessions))
	for i, s := range sessions {
		msgs[i] = h.msgs(poolTurn)
		es[i] = h.entry("message_appended", func(e *auditv1.AuditEntry) { e.SessionId = s.SessionId })
		cmds[i] = &persistence.AppendMessages{SessionID: s.SessionId, NextSequence: next[i],
			Turns: []persistence.Turn{{Messages: msgs[i], Audit: es[i : i+1]}}}
	}
	return cmds, msgs, es
}

var poolCases = []testCase{
	{"a retried turn and a stale append amid pooled rows of many sessions", func(h *harness) {
		sessions := make([]*sessionv1.Session, poolSessions)
		for i := range sessions {
			sessions[i] = h.create()
		}
		// One turn is stored first: its retry rides in the big batch.
		first := h.msgs(3)
		stored := h.appendOK(&persistence.AppendMessages{SessionID: sessions[5].SessionId, NextSequence: 0,
			Turns: []persistence.Turn{turn(first...)}})
		next := make([]int64, poolSessions)
		next[5] = stored.NextSequence

		batch, msgs, es := h.poolBatch(sessions, next)
		// The retry comes after session 5's append in the batch, at the
		// next sequence its owner would then hold.
		retry := &persistence.AppendMessages{SessionID: sessions[5].SessionId, NextSequence: next[5] + poolTurn,
			Turns: []persistence.Turn{turn(clone(first...)...)}}
		// Stale: it claims the sequence the retried turn already holds.
		staleEntry := h.entry("message_appended")
		stale := &persistence.AppendMessages{SessionID: sessions[9].SessionId, NextSequence: 3,
			Turns: []persistence.Turn{{Messages: h.msgs(poolTurn), Audit: []*auditv1.AuditEntry{staleEntry}}}}
		mid := poolSessions / 2
		all := append(append(commands(batch[:mid]...), retry, stale), commands(batch[mid:]...)...)

		res := h.apply(all...)
		for i, r := range res {
			switch {
			case i == mid: // the retry
				out := retry.ResultOf(r)
				if r.Err != nil || len(out.Turns) != 1 || !out.Turns[0].Duplicate {
					h.Fatalf("retried turn: err %v, turns %+v; want a duplicate", r.Err, out.Turns)
				}
				checkTurn(h, out.Turns[0], sessions[5].SessionId, 0, first)
			case i == mid+1: // the stale append
				wantCode(h.T, r.Err, errs.FailedPreconditionCode)
			default:
				k := i
				if i > mid {
					k = i - 2
				}
				if r.Err != nil {
					h.Fatalf("command %d (session %d): %v", i, k, r.Err)
				}
				checkTurn(h, batch[k].ResultOf(r).Turns[0], sessions[k].SessionId, next[k], msgs[k])
			}
		}
		if staleEntry.Position != 0 {
			h.Fatalf("the stale append's audit entry kept position %d", staleEntry.Position)
		}
		for k, s := range sessions {
			want := next[k] + poolTurn
			if got := h.get(s.SessionId).MessageCount; got != want {
				h.Fatalf("session %d: message_count %d, want %d", k, got, want)
			}
			if got := int64(len(h.messages(s.SessionId))); got != want {
				h.Fatalf("session %d: %d messages stored, want %d", k, got, want)
			}
		}
		// Entries chain in command order, skipping the stale one.
		h.inOrder(es[0].Position, es...)
		h.verifyChain()
	}},
	{"a concurrent reader sees whole transactions only", func(h *harness) {
		// Each transaction stores txCommands audit entries; a reader
		// scanning while they commit must see a multiple of it every time.
		const txCommands, txs = 10, 30
		sessions := make([]*sessionv1.Session, txCommands)
		for i := range sessions {
			sessions[i] = h.create()
		}
		base := len(h.scan())
		// With one chain positions are dense; with several they rise.
		dense := h.chains() == 1
		var (
			wg   sync.WaitGroup
			done = make(chan struct{})
			seen []string
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				page, err := h.r.ScanAudit(h.ctx, 0, 1000)
				if err != nil {
					seen = append(seen, "scan: "+err.Error())
					return
				}
				if n := len(page) - base; n%txCommands != 0 {
					seen = append(seen, fmt.Sprintf("%d entries of a %d-command transaction", n%txCommands, txCommands))
				}
				for i, e := range page {
					if dense && e.Position != int64(i+1) || i > 0 && e.Position <= page[i-1].Position {
						seen = append(seen, fmt.Sprintf("entry %d at position %d", i, e.Position))
						break
					}
				}
			}
		}()
		next := make([]int64, txCommands)
		for t := 0; t < txs; t++ {
			batch, _, _ := h.poolBatch(sessions, next)
			for i, r := range h.apply(commands(batch...)...) {
				if r.Err != nil {
					close(done)
					wg.Wait()
					h.Fatalf("transaction %d command %d: %v", t, i, r.Err)
				}
			}
			for i := range next {
				next[i] += poolTurn
			}
		}
		close(done)
		wg.Wait()
		if len(seen) > 0 {
			h.Fatalf("the reader saw a transaction in part: %v", seen)
		}
		if n := len(h.scan()) - base; n != txCommands*txs {
			h.Fatalf("%d entries stored, want %d", n, txCommands*txs)
		}
	}},
}
