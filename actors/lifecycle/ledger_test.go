package lifecycle_test

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/agentstate/agentstate/actors/lifecycle"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ledger is the scripts' domain (see TestKernelScripts).
type ledger struct {
	loaded  bool // a load was stepped: a fresh ledger decides an append blind
	exists  bool
	next    int64 // committed next sequence
	first   int64 // committed first sequence: what trims left
	closed  bool
	rebased int
	writes  map[persistence.Command]*built // every command the ledger built
}

// built is what the ledger built a command as: the scripts show it, and
// Applied answers it, from this record rather than from the command's
// type (outside persistence nothing switches on a command's type).
type built struct {
	op      string // activate | create | append | close | trim
	epoch   int64
	next    int64  // an append's next sequence (a blind one's: 0, the store decides)
	through int64  // a trim's last removed sequence
	then    *built // an activation's folded write
	loaded  *persistence.SessionMark
}

// build records what cmd was built as and returns it.
func (d *ledger) build(cmd persistence.Command, b *built) persistence.Command {
	if d.writes == nil {
		d.writes = map[persistence.Command]*built{}
	}
	d.writes[cmd] = b
	return cmd
}

func (d *ledger) Describe() (string, string) { return "ledger", "L" }

func (d *ledger) Activate() persistence.Command {
	return d.build(&persistence.Activate{Kind: persistence.OwnerSession, ID: "L"}, &built{op: "activate"})
}

func text(r *lifecycle.Request) string { return r.Msg.(*wrapperspb.StringValue).GetValue() }

func (d *ledger) Accept(r *lifecycle.Request, a *lifecycle.Answers) bool {
	if text(r) == "bad" {
		a.Reply(r, nil, errs.InvalidArgument("a bad request"))
		return false
	}
	return true
}

func (d *ledger) Batching(r *lifecycle.Request) (lifecycle.Batching, int) {
	switch t := text(r); {
	case t == "append", strings.HasPrefix(t, "rec="):
		return lifecycle.Batched, 1
	case strings.HasPrefix(t, "cond="):
		return lifecycle.Leads, 1
	}
	return lifecycle.Alone, 1
}

// Limits: at most three requests in one write, so the scripts show the
// bound.
func (d *ledger) Limits() (int, int) { return 3, 1 << 20 }

func (d *ledger) Decide(run []*lifecycle.Request, epoch int64, a *lifecycle.Answers) *lifecycle.Write {
	if text(run[0]) == "create" {
		if d.exists {
			a.Reply(run[0], wrapperspb.String("exists"), nil)
			return nil
		}
		return &lifecycle.Write{Cmd: d.build(&persistence.CreateSession{Epoch: epoch}, &built{op: "create", epoch: epoch}), Carried: run}
	}
	if strings.HasPrefix(text(run[0]), "trim=") {
		return d.decideTrim(run[0], epoch, a)
	}
	if text(run[0]) == "close" {
		if !d.exists {
			a.Reply(run[0], nil, errs.NotFound("ledger L does not exist"))
			return nil
		}
		return &lifecycle.Write{Cmd: d.build(&persistence.UpdateSession{Epoch: epoch, SessionID: "L"}, &built{op: "close", epoch: epoch}), Carried: run}
	}
	var carried []*lifecycle.Request
	if epoch == 0 && !d.loaded && text(run[0]) == "append" {
		// Blind (new fold blind): the store decides the sequence.
		return &lifecycle.Write{Cmd: d.build(&persistence.AppendMessages{SessionID: "L"}, &built{op: "append"}), Carried: run, Window: ledgerWindow}
	}
	for _, r := range run {
		switch t := text(r); {
		case !d.exists:
			a.Reply(r, nil, errs.NotFound("ledger L does not exist"))
		case d.closed:
			a.Reply(r, nil, errs.FailedPrecondition("ledger L is closed"))
		case strings.HasPrefix(t, "cond=") && t != "cond="+strconv.FormatInt(d.next, 10):
			a.Reply(r, nil, errs.FailedPrecondition("ledger L: expected %s, next is %d", strings.TrimPrefix(t, "cond="), d.next))
		default:
			carried = append(carried, r)
		}
	}
	if len(carried) == 0 {
		return nil
	}
	cmd := d.build(&persistence.AppendMessages{Epoch: epoch, SessionID: "L", NextSequence: d.next}, &built{op: "append", epoch: epoch, next: d.next})
	return &lifecycle.Write{Cmd: cmd, Carried: carried, Window: ledgerWindow}
}

func (d *ledger) Applied(w *lifecycle.Write, res persistence.Result, a *lifecycle.Answers) lifecycle.Outcome {
	var exist *persistence.RecordsExistError
	if errors.As(res.Err, &exist) {
		return d.recordsExist(w.Carried, exist, a)
	}
	if t, ok := w.Data.(*trim); ok {
		return d.trimmed(w, t, res, a)
	}
	if res.Err != nil {
		for _, r := range w.Carried {
			a.Reply(r, nil, res.Err)
		}
		switch errs.CodeOf(res.Err) {
		case errs.FailedPreconditionCode, errs.OutcomeUnknownCode:
			return lifecycle.Outcome{Stale: true}
		}
		return lifecycle.Outcome{Rebase: true}
	}
	b, blind := d.writes[w.Cmd], false
	if b.then != nil { // folded into its activation
		b, blind = b.then, b.loaded == nil
	}
	if b.op == "create" {
		d.exists = true
		a.Reply(w.Carried[0], wrapperspb.String("created"), nil)
		return lifecycle.Outcome{}
	}
	if b.op == "close" {
		d.closed = true
		a.Reply(w.Carried[0], wrapperspb.String("closed"), nil)
		return lifecycle.Outcome{}
	}
	var out lifecycle.Outcome
	if blind {
		// A blind append: the store read the ledger; it exists, open.
		if res.Head == nil {
			for _, r := range w.Carried {
				a.Reply(r, nil, errs.Internal("no head"))
			}
			return lifecycle.Outcome{Stale: true}
		}
		d.exists, d.closed, d.next = true, false, res.Head.NextSequence
		out.Partial = true
	}
	for _, r := range w.Carried {
		a.Reply(r, wrapperspb.String("seq="+strconv.FormatInt(d.next, 10)), nil)
		d.next++
	}
	return out
}

// ledgerWindow is the longest commit window after an append write (a
// session's is the same).
const ledgerWindow = 2 * time.Millisecond

func (d *ledger) Refuse(r *lifecycle.Request, err error, a *lifecycle.Answers) { a.Reply(r, nil, err) }

func (d *ledger) Rebase([]*lifecycle.Request) { d.rebased++ }

func (d *ledger) Owns() bool { return d.exists }

// foldingLedger is the ledger whose first write carries its activation
// (lifecycle.Folding), as a session's does: an append run or a create
// folds; a create is decided without a load.
type foldingLedger struct {
	*ledger
	blind bool // appends are Blind too
}

func (d *foldingLedger) Folds(r *lifecycle.Request) bool {
	t := text(r)
	return t == "append" || t == "create" || strings.HasPrefix(t, "cond=")
}

func (d *foldingLedger) Blind(r *lifecycle.Request) bool {
	return text(r) == "create" || (d.blind && text(r) == "append")
}

// Partly: appends are decided on the next sequence a blind append's
// result told; a close or a create needs the whole ledger, loaded.
func (d *foldingLedger) Partly(r *lifecycle.Request) bool {
	t := text(r)
	return t == "append" || strings.HasPrefix(t, "cond=")
}

func (d *foldingLedger) Fold(cmd persistence.Command, loaded bool) persistence.Command {
	a := &persistence.Activate{Kind: persistence.OwnerSession, ID: "L", Then: cmd}
	if loaded {
		a.Loaded = &persistence.SessionMark{Exists: d.exists, NextSequence: d.next}
	}
	return d.build(a, &built{op: "activate", then: d.writes[cmd], loaded: a.Loaded})
}
