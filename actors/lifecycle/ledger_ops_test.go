package lifecycle_test

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentstate/agentstate/actors/lifecycle"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The ledger's two requests whose writes end in more than one step, as a
// plan's and a session's do: "rec=ID" is an append with an idempotency
// key, and "trim=N" removes the entries below N in chunks.

// recordsExist is a plan's retry path (Outcome.Requeue): the store refused
// a write because record ids of it are stored already, and stored nothing.
// Each request whose id it named is a retry of a committed record and is
// answered with it; the others go back to the head of the queue and are
// decided again. A named record the ledger does not count (its sequence
// is past the committed next one) means memory lags the store: the
// ledger is loaded before they are. A refusal that names none of the
// write's ids would fail again: its requests fail.
func (d *ledger) recordsExist(carried []*lifecycle.Request, e *persistence.RecordsExistError, a *lifecycle.Answers) lifecycle.Outcome {
	stored := make(map[string]int64, len(e.Stored))
	for _, r := range e.Stored {
		stored[r.GetRecordId()] = r.GetSequence()
	}
	var resend []*lifecycle.Request
	stale := false
	for _, r := range carried {
		seq, ok := stored[strings.TrimPrefix(text(r), "rec=")]
		if !ok || !strings.HasPrefix(text(r), "rec=") {
			resend = append(resend, r)
			continue
		}
		stale = stale || seq >= d.next
		a.Reply(r, wrapperspb.String("duplicate seq="+strconv.FormatInt(seq, 10)), nil)
	}
	if len(resend) == len(carried) {
		for _, r := range carried {
			a.Reply(r, nil, errs.Internal("ledger L: the store named no record of the write"))
		}
		return lifecycle.Outcome{Rebase: true}
	}
	return lifecycle.Outcome{Requeue: resend, Stale: stale, Rebase: true}
}

// trimChunk is how many entries one trim write removes at most; the
// scripts trim a few, so they show the chunks.
const trimChunk = 2

// trim is a trim's progress, carried from chunk to chunk (Write.Data).
type trim struct {
	through int64 // the first sequence that stays
	removed int64
}

// decideTrim starts a trim: removing nothing needs no write.
func (d *ledger) decideTrim(r *lifecycle.Request, epoch int64, a *lifecycle.Answers) *lifecycle.Write {
	n, err := strconv.ParseInt(strings.TrimPrefix(text(r), "trim="), 10, 64)
	switch {
	case err != nil:
		a.Reply(r, nil, errs.InvalidArgument("%s: %v", text(r), err))
		return nil
	case !d.exists:
		a.Reply(r, nil, errs.NotFound("ledger L does not exist"))
		return nil
	}
	t := &trim{through: min(n, d.next)}
	if t.through <= d.first {
		a.Reply(r, wrapperspb.String(fmt.Sprintf("trimmed 0 first=%d", d.first)), nil)
		return nil
	}
	return &lifecycle.Write{Cmd: d.trimCmd(t, epoch), Carried: []*lifecycle.Request{r}, Data: t}
}

// trimCmd is the write of a trim's next chunk.
func (d *ledger) trimCmd(t *trim, epoch int64) persistence.Command {
	cmd := &persistence.TruncateSession{Epoch: epoch, SessionID: "L", Through: t.through - 1, Limit: trimChunk}
	return d.build(cmd, &built{op: "trim", epoch: epoch, through: cmd.Through})
}

// trimmed is a session's chunked truncation (Outcome.Continue): a chunk
// that removed a whole chunk continues with the next one at once, before
// anything queued is decided. The first sequence in memory moves only
// with the last chunk; a chunk that fails after others committed leaves
// memory behind the store, so the ledger is loaded before the next
// decision.
func (d *ledger) trimmed(w *lifecycle.Write, t *trim, res persistence.Result, a *lifecycle.Answers) lifecycle.Outcome {
	r := w.Carried[0]
	if res.Err != nil {
		a.Reply(r, nil, res.Err)
		if t.removed > 0 || errs.CodeOf(res.Err) == errs.OutcomeUnknownCode {
			return lifecycle.Outcome{Stale: true}
		}
		return lifecycle.Outcome{Rebase: true}
	}
	// every trim is a TruncateSession (trimCmd), possibly inside an Activate.
	n := (*persistence.TruncateSession)(nil).ResultOf(res).Removed
	t.removed += n
	if n == trimChunk {
		return lifecycle.Outcome{Continue: d.trimCmd(t, d.writes[w.Cmd].epoch), ContinueData: t}
	}
	d.first = t.through
	a.Reply(r, wrapperspb.String(fmt.Sprintf("trimmed %d first=%d", t.removed, d.first)), nil)
	return lifecycle.Outcome{}
}
