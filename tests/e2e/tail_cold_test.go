package e2e_test

import (
	"strings"
	"testing"
	"time"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// nextWithin is next, failing unless the line arrives within d.
func (p *tailProc) nextWithin(m proto.Message, d time.Duration) {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("%v ended early: %v", p.cmd.Args, p.err)
		}
		if err := protojson.Unmarshal([]byte(line), m); err != nil {
			p.t.Fatalf("%v printed %q: %v", p.cmd.Args, line, err)
		}
	case <-time.After(d):
		p.t.Fatalf("%v printed nothing within %v", p.cmd.Args, d)
	}
}

// TestCLISessionTailSeesAppendAfterPassivation is the report as a
// user meets it: a node with a short idle timeout, a session tailed while
// its actor passivates, then exactly one append. That append is the fresh
// actor's first write, carried by its activation; the tail prints it at
// once, not with the session's next append.
func TestCLISessionTailSeesAppendAfterPassivation(t *testing.T) {
	n := startNode(t, "--idle-timeout", "200ms")
	var none []string
	var created sessionv1.CreateSessionResponse
	n.cli(none, "session", "create", "--actor", "tailer").ok(t, &created)
	sid := created.GetSession().GetSessionId()
	n.cli(none, "session", "append", "--session", sid, "--role", "user", "--content", "before").ok(t)

	st := n.startTail("session", "tail", "--session", sid)
	var ev feedv1.SessionEvent
	st.next(&ev)
	if ev.GetMessage().GetSequence() != 0 {
		t.Fatalf("the tail's first line is %v, want sequence 0", &ev)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, metrics := n.httpGet("/metrics")
		if strings.Contains(metrics, `agentstate_active_actors{kind="session"} 0`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session actor did not passivate within 30s of a 200ms idle timeout")
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, not ordering events
	}
	n.cli(none, "session", "append", "--session", sid, "--role", "user", "--content", "after").ok(t)
	st.nextWithin(&ev, time.Second)
	if ev.GetMessage().GetSequence() != 1 || ev.GetMessage().GetContent() != "after" {
		t.Fatalf("the tail printed %v, want sequence 1 'after'", &ev)
	}
	if code := st.interrupt(); code != 0 {
		t.Fatalf("session tail exited %d on Ctrl-C, want 0", code)
	}
}
