package e2e_test

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// tailProc is a running `node session tail` or `node audit tail`: its
// stdout is read line by line as the command flushes each one.
type tailProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{} // closed once stdout is at EOF and the process was reaped
	err   error
}

func (n *nodeProc) startTail(args ...string) *tailProc {
	n.t.Helper()
	full := append(append([]string{}, args...), "--addr", n.grpcAddr())
	cmd := exec.Command(cliBin, full...)
	cmd.Env = cleanEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start %v: %v", args, err)
	}
	p := &tailProc{t: n.t, cmd: cmd, lines: make(chan string, 64), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = cmd.Wait()
	}()
	n.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// next decodes the tail's next line into m; the tail prints each event as
// it arrives, so waiting on the line is waiting on the delivery.
func (p *tailProc) next(m proto.Message) {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("%v ended early: %v", p.cmd.Args, p.err)
		}
		if err := protojson.Unmarshal([]byte(line), m); err != nil {
			p.t.Fatalf("%v printed %q: %v", p.cmd.Args, line, err)
		}
	case <-time.After(60 * time.Second):
		p.t.Fatalf("%v printed nothing within a minute", p.cmd.Args)
	}
}

// interrupt sends SIGINT (Ctrl-C) and returns the exit status; the tail
// must print nothing more.
func (p *tailProc) interrupt() int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var extra []string
	for {
		select {
		case line, ok := <-p.lines:
			if ok {
				extra = append(extra, line)
				continue
			}
			<-p.done
			if len(extra) > 0 {
				p.t.Fatalf("%v printed after Ctrl-C: %q", p.cmd.Args, extra)
			}
			var ee *exec.ExitError
			if errors.As(p.err, &ee) {
				return ee.ExitCode()
			}
			if p.err != nil {
				p.t.Fatal(p.err)
			}
			return 0
		case <-ctx.Done():
			p.t.Fatalf("%v did not exit within 30s of SIGINT", p.cmd.Args)
		}
	}
}

// TestCLITailsFollowAndEndCleanlyOnCtrlC runs `session tail` and `audit
// tail` as a user would: each prints what was stored, then what commits
// while it runs, one JSON line per event, resumes from a given position,
// and exits 0 on Ctrl-C.
func TestCLITailsFollowAndEndCleanlyOnCtrlC(t *testing.T) {
	n := startNode(t, "--audit-messages")
	var none []string
	var created sessionv1.CreateSessionResponse
	n.cli(none, "session", "create", "--actor", "tailer").ok(t, &created)
	sid := created.GetSession().GetSessionId()
	n.cli(none, "session", "append", "--session", sid, "--role", "user", "--content", "stored before").ok(t)

	st := n.startTail("session", "tail", "--session", sid)
	ct := n.startTail("audit", "tail", "--after", "0", "--session", sid)

	var ev feedv1.SessionEvent
	st.next(&ev)
	if ev.GetMessage().GetSequence() != 0 || ev.GetMessage().GetContent() != "stored before" {
		t.Fatalf("session tail's first line is %v, want sequence 0 'stored before'", &ev)
	}
	var ch feedv1.ChangeEvent
	ct.next(&ch)
	if ch.GetEntry().GetEventType() != "session_created" {
		t.Fatalf("audit tail's first line is %v, want the session_created entry", &ch)
	}
	first := ch.GetEntry().GetPosition()
	ct.next(&ch)
	if ch.GetEntry().GetEventType() != "message_appended" || ch.GetEntry().GetPosition() <= first {
		t.Fatalf("audit tail's second line is %v, want the message_appended entry after %d", &ch, first)
	}

	// Live: appended while both run.
	for _, c := range []string{"live one", "live two"} {
		n.cli(none, "session", "append", "--session", sid, "--role", "assistant", "--content", c).ok(t)
	}
	for i, want := range []string{"live one", "live two"} {
		st.next(&ev)
		if ev.GetMessage().GetSequence() != int64(i+1) || ev.GetMessage().GetContent() != want {
			t.Fatalf("session tail printed %v, want sequence %d %q", &ev, i+1, want)
		}
		last := ch.GetEntry().GetPosition()
		ct.next(&ch)
		if ch.GetEntry().GetEventType() != "message_appended" || ch.GetEntry().GetPosition() <= last {
			t.Fatalf("audit tail printed %v, want a message_appended entry after %d", &ch, last)
		}
	}
	if code := st.interrupt(); code != 0 {
		t.Fatalf("session tail exited %d on Ctrl-C, want 0", code)
	}
	if code := ct.interrupt(); code != 0 {
		t.Fatalf("audit tail exited %d on Ctrl-C, want 0", code)
	}

	// Resuming from the last sequence seen + 1 prints only what follows it.
	n.cli(none, "session", "append", "--session", sid, "--role", "user", "--content", "after the break").ok(t)
	resumed := n.startTail("session", "tail", "--session", sid, "--from", "2")
	resumed.next(&ev)
	if ev.GetMessage().GetSequence() != 2 {
		t.Fatalf("resumed tail's first line is %v, want sequence 2", &ev)
	}
	resumed.next(&ev)
	if ev.GetMessage().GetSequence() != 3 || ev.GetMessage().GetContent() != "after the break" {
		t.Fatalf("resumed tail printed %v, want sequence 3", &ev)
	}
	if code := resumed.interrupt(); code != 0 {
		t.Fatalf("resumed session tail exited %d on Ctrl-C, want 0", code)
	}
}
