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
}

func (d *ledger) Describe() (string, string) { return "ledger", "L" }

func (d *ledger) Activate() persistence.Command {
	return &persistence.Activate{Kind: persistence.OwnerSession, ID: "L"}
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
		return &lifecycle.Write{Cmd: &persistence.CreateSession{Epoch: epoch}, Carried: run}
	}
	if strings.HasPrefix(text(run[0]), "trim=") {
		return d.decideTrim(run[0], epoch, a)
	}
	if text(run[0]) == "close" {
		if !d.exists {
			a.Reply(run[0], nil, errs.NotFound("ledger L does not exist"))
			return nil
		}
		return &lifecycle.Write{Cmd: &persistence.UpdateSession{Epoch: epoch, SessionID: "L"}, Carried: run}
	}
	var carried []*lifecycle.Request
	if epoch == 0 && !d.loaded && text(run[0]) == "append" {
		// Blind (new fold blind): the store decides the sequence.
		return &lifecycle.Write{Cmd: &persistence.AppendMessages{SessionID: "L"}, Carried: run, Window: ledgerWindow}
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
	return &lifecycle.Write{Cmd: &persistence.AppendMessages{Epoch: epoch, SessionID: "L", NextSequence: d.next}, Carried: carried, Window: ledgerWindow}
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
	if _, ok := w.Cmd.(*persistence.CreateSession); ok || isFolded[*persistence.CreateSession](w.Cmd) {
		d.exists = true
		a.Reply(w.Carried[0], wrapperspb.String("created"), nil)
		return lifecycle.Outcome{}
	}
	if _, ok := w.Cmd.(*persistence.UpdateSession); ok {
		d.closed = true
		a.Reply(w.Carried[0], wrapperspb.String("closed"), nil)
		return lifecycle.Outcome{}
	}
	var out lifecycle.Outcome
	if act, ok := w.Cmd.(*persistence.Activate); ok && act.Loaded == nil {
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
	return a
}

// isFolded reports whether cmd is an activation carrying a T.
func isFolded[T persistence.Command](cmd persistence.Command) bool {
	a, ok := cmd.(*persistence.Activate)
	if !ok {
		return false
	}
	_, ok = a.Then.(T)
	return ok
}
