package lifecycle_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/lifecycle"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The kernel's protocol, specified by scripts (testdata/*): each step is an
// event, and its expected output is every effect the kernel hands back,
// in order. The form follows etcd-io/raft's interaction tests (written
// here anew for this kernel).
//
// The scripts drive the kernel with ledger, a domain as small as a
// session's: appends number their entries densely (the next sequence is
// the committed one; it advances only on a commit), a conditional append
// ("cond=N") leads its write and is refused unless N is the committed
// next sequence, a close is a write of its own and refuses later appends,
// and "bad" is refused by Accept; a create is a write of its own, answered
// "exists" when the ledger exists. Append writes opt into the commit window
// (up to 2ms); a close does not. After "new fold" the ledger folds its
// first write into its activation (lifecycle.Folding): appends and creates
// fold, a create is decided without a load. After "new fold blind" a plain
// append is decided without a load as well: the store reports the ledger's
// next sequence with the commit ("applied ... head=N"), after which the
// ledger knows enough for appends (Partly) but loads before a close or a
// create.
//
// Commands:
//
//	new [fold [blind]]  a fresh kernel and ledger
//	arrive            one request per input line: append | cond=N | close | create | bad
//	applied tag=N     ok | epoch=N [head=N] | fenced | err=<unavailable|outcome-unknown|conflict>
//	                  [took=D]: how long the write was in flight (default 0)
//	window-closed gen=N   the commit window's timer fired
//	loaded            [missing] [next=N] [err]: the load effect's outcome (the store's state)
//	tick | passivate | moveout | stopped
//	state             the kernel's and the domain's state
func TestKernelScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var (
			k *lifecycle.Kernel
			d *ledger
		)
		reset := func(fold, blind bool) {
			d = &ledger{}
			if fold {
				k = lifecycle.New(&foldingLedger{ledger: d, blind: blind})
			} else {
				k = lifecycle.New(d)
			}
		}
		reset(false, false)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "new":
				reset(td.HasArg("fold"), td.HasArg("blind"))
				return ""
			case "arrive":
				for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
					k.Arrive(&lifecycle.Request{Msg: wrapperspb.String(strings.TrimSpace(line))})
				}
			case "applied":
				var tag int
				td.ScanArgs(t, "tag", &tag)
				var took time.Duration
				if td.HasArg("took") {
					var s string
					td.ScanArgs(t, "took", &s)
					var err error
					if took, err = time.ParseDuration(s); err != nil {
						t.Fatalf("took=%s: %v", s, err)
					}
				}
				k.Applied(uint64(tag), result(t, td), took)
			case "window-closed":
				var gen int
				td.ScanArgs(t, "gen", &gen)
				k.WindowClosed(uint64(gen))
			case "loaded":
				var err error
				if td.HasArg("err") {
					err = errs.Unavailable("injected: the store cannot be read")
				}
				d.exists, d.loaded = !td.HasArg("missing"), true
				if td.HasArg("next") {
					td.ScanArgs(t, "next", &d.next)
				}
				k.Loaded(err)
			case "tick":
				k.Tick()
			case "passivate":
				k.Passivate()
			case "moveout":
				k.MoveOut()
			case "stopped":
				k.Stopped()
			case "state":
				return fmt.Sprintf("epoch=%d inflight=%d waiting=%d next=%d closed=%v rebased=%d\n",
					k.Epoch(), k.InFlight(), k.Waiting(), d.next, d.closed, d.rebased)
			default:
				t.Fatalf("unknown command %q", td.Cmd)
			}
			return d.show(k.Ready())
		})
	})
}

func result(t *testing.T, td *datadriven.TestData) persistence.Result {
	switch {
	case td.HasArg("epoch"):
		var e int
		td.ScanArgs(t, "epoch", &e)
		res := persistence.Result{Epoch: int64(e)}
		if td.HasArg("head") {
			var n int
			td.ScanArgs(t, "head", &n)
			res.Head = &persistence.SessionHead{NextSequence: int64(n)}
		}
		return res
	case td.HasArg("fenced"):
		return persistence.Result{Err: persistence.ErrFenced}
	case td.HasArg("err"):
		var kind string
		td.ScanArgs(t, "err", &kind)
		switch kind {
		case "unavailable":
			return persistence.Result{Err: errs.Unavailable("injected: disk full")}
		case "outcome-unknown":
			return persistence.Result{Err: errs.OutcomeUnknown("injected: COMMIT's answer was lost")}
		case "conflict":
			return persistence.Result{Err: errs.FailedPrecondition("injected: the sequence is taken")}
		}
		t.Fatalf("unknown err=%s", kind)
	}
	return persistence.Result{}
}

// show prints a Ready, one effect a line, in the order the shell carries
// them out. A write is shown as the ledger built it (built), not by the
// command's type.
func (d *ledger) show(rd lifecycle.Ready) string {
	var b strings.Builder
	for _, r := range rd.Replies {
		if r.Err != nil {
			fmt.Fprintf(&b, "reply #%d %v\n", r.Req.Seq, r.Err)
		} else {
			fmt.Fprintf(&b, "reply #%d %s\n", r.Req.Seq, r.Msg.(*wrapperspb.StringValue).GetValue())
		}
	}
	if w := rd.Submit; w != nil {
		switch c := d.writes[w.Cmd]; {
		case c == nil:
			fmt.Fprintf(&b, "submit tag=%d (a command the ledger did not build)\n", w.Tag)
		case c.op == "activate" && c.then == nil:
			fmt.Fprintf(&b, "submit tag=%d activate\n", w.Tag)
		case c.op == "activate" && c.then.op == "append":
			next := strconv.FormatInt(c.then.next, 10)
			if c.loaded == nil {
				next = "?" // blind: the store decides
			}
			fmt.Fprintf(&b, "submit tag=%d activate%s+append next=%s carries=%s\n", w.Tag, loadedMark(c.loaded), next, seqs(w.Carried))
		case c.op == "activate":
			fmt.Fprintf(&b, "submit tag=%d activate%s+%s carries=%s\n", w.Tag, loadedMark(c.loaded), c.then.op, seqs(w.Carried))
		case c.op == "append":
			fmt.Fprintf(&b, "submit tag=%d epoch=%d next=%d carries=%s\n", w.Tag, c.epoch, c.next, seqs(w.Carried))
		default:
			fmt.Fprintf(&b, "submit tag=%d epoch=%d %s carries=%s\n", w.Tag, c.epoch, c.op, seqs(w.Carried))
		}
	}
	if h := rd.Hold; h.For > 0 {
		fmt.Fprintf(&b, "hold gen=%d for=%v\n", h.Gen, h.For)
	}
	if rd.Load {
		b.WriteString("load\n")
	}
	if rd.Fenced {
		b.WriteString("fenced\n")
	}
	if rd.AskPassivation {
		b.WriteString("ask-passivation\n")
	}
	if rd.Stop {
		b.WriteString("stop\n")
	}
	return b.String()
}

// loadedMark shows what a folded activation says its load saw.
func loadedMark(m *persistence.SessionMark) string {
	switch {
	case m == nil:
		return "(unloaded)"
	case !m.Exists:
		return "(loaded missing)"
	}
	return fmt.Sprintf("(loaded next=%d)", m.NextSequence)
}

func seqs(rs []*lifecycle.Request) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = "#" + strconv.FormatUint(r.Seq, 10)
	}
	return strings.Join(s, ",")
}

// ledger is the scripts' domain (see TestKernelScripts).
type ledger struct {
	loaded  bool // a load was stepped: a fresh ledger decides an append blind
	exists  bool
	next    int64 // committed next sequence
	closed  bool
	rebased int
	writes  map[persistence.Command]*built // every command the ledger built
}

// built is what the ledger built a command as: the scripts show it, and
// Applied answers it, from this record rather than from the command's type.
type built struct {
	op     string // activate | create | append | close
	epoch  int64
	next   int64  // an append's next sequence (a blind one's: 0, the store decides)
	then   *built // an activation's folded write
	loaded *persistence.SessionMark
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
	case t == "append":
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
