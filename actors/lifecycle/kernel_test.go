package lifecycle_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/lifecycle"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
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
//	arrive            one request per input line: append | cond=N | close | create | bad |
//	                  rec=ID (an append with an idempotency key) | trim=N (remove entries below N)
//	applied tag=N     ok | epoch=N [head=N] | fenced | err=<unavailable|outcome-unknown|conflict> |
//	                  exists=(ID[:SEQ], ...): the store refused the write, naming stored record ids |
//	                  removed=N: a trim chunk removed N entries
//	                  [took=D]: how long the write was in flight (default 0)
//	window-closed gen=N   the commit window's timer fired
//	loaded            [missing] [next=N] [first=N] [err]: the load effect's outcome (the store's state)
//	tick | passivate | moveout | stopped
//	state             the kernel's and the domain's state
//	phase             the kernel's phase (phase.go)
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
				if td.HasArg("first") {
					td.ScanArgs(t, "first", &d.first)
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
			case "phase":
				return k.Phase() + "\n"
			default:
				t.Fatalf("unknown command %q", td.Cmd)
			}
			if err := lifecycle.Invariant(k); err != nil {
				t.Fatalf("%s: after %s: %v", td.Pos, td.Cmd, err)
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
	case td.HasArg("removed"):
		var n int
		td.ScanArgs(t, "removed", &n)
		return persistence.RemovedResult{Removed: int64(n)}.Result()
	case td.HasArg("exists"):
		e := &persistence.RecordsExistError{PlanID: "L"}
		for _, arg := range td.CmdArgs {
			if arg.Key != "exists" {
				continue
			}
			for _, v := range arg.Vals {
				id, seq, _ := strings.Cut(v, ":")
				n, _ := strconv.ParseInt(seq, 10, 64)
				e.Stored = append(e.Stored, &planv1.ErrorRecord{PlanId: "L", RecordId: id, Sequence: n})
			}
		}
		return persistence.Result{Err: e}
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
// them out.
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
		case c.op == "trim":
			fmt.Fprintf(&b, "submit tag=%d epoch=%d trim through=%d carries=%s\n", w.Tag, c.epoch, c.through, seqs(w.Carried))
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
