package soak

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/node/server"
	"github.com/agentstate/agentstate/tests/checker"
	"github.com/agentstate/agentstate/tests/proc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

var (
	tailsBound    = flag.Int64("soak.tails-bound", 768<<20, "TestUnreadTails: the node's VmHWM must stay below this")
	unreadTails   = flag.Int("soak.unread-tails", 300, "TestUnreadTails: TailSession streams the hostile connection opens and never reads")
	honestAppends = flag.Int("soak.honest-appends", 20, "TestUnreadTails: appends the honest client makes and must see on its tail")
)

// tailLatency is how soon after its append was acknowledged the honest
// tail must deliver each message.
const tailLatency = time.Second

// TestUnreadTails is issue 26's attack: one client connection opens
// TailSession streams from sequence 0 on a session of 40 messages of 1 MiB
// each and never reads them (a 64 KiB receive window, so the node's sends
// block at once), while an honest client on a connection of its own tails
// the same session and appends to it. The node runs with its default
// memory settings (it sets its own soft limit). Its VmHWM must stay below
// -soak.tails-bound, and the honest tail must deliver each new message
// within a second of its append being acknowledged.
func TestUnreadTails(t *testing.T) {
	bin := build.Path(t, *nodeBinary, "off", false)
	dir := t.TempDir()
	if old, set := os.LookupEnv("GOMEMLIMIT"); set {
		// Unset, so that the node sets its own soft limit.
		t.Setenv("GOMEMLIMIT", old)
		os.Unsetenv("GOMEMLIMIT")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	n, err := checker.StartNode(ctx, checker.NodeConfig{Binary: bin, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	pid := n.PID()

	honest, err := n.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer honest.Close()
	api := sessionv1.NewSessionServiceClient(honest)
	created, err := api.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "tails"})
	if err != nil {
		t.Fatal(err)
	}
	sid := created.GetSession().GetSessionId()
	const held = 40
	big := strings.Repeat("x", 1<<20-64) // just inside the 1 MiB content limit
	for i := range held {
		if _, err := api.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{
			{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER, Content: big}}}); err != nil {
			t.Fatalf("append %d of 1 MiB: %v", i, err)
		}
	}
	startRSS, _ := proc.Status(pid, "VmRSS")

	// The hostile connection: its streams are admitted (headers) or
	// refused, and none is ever read. Streams past the connection's
	// HTTP/2 stream bound wait in the client for a slot, so the test
	// waits for at most that many answers.
	hostile, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer hostile.Close()
	hctx, stopHostile := context.WithCancel(ctx)
	defer stopHostile()
	feeds := feedv1.NewFeedServiceClient(hostile)
	answers := make(chan error, *unreadTails)
	for range *unreadTails {
		go func() {
			st, err := feeds.TailSession(hctx, &feedv1.TailSessionRequest{SessionId: sid})
			if err == nil {
				_, err = st.Header()
			}
			answers <- err
		}()
	}
	admitted, refused := 0, map[codes.Code]int{}
	for range min(*unreadTails, server.DefaultGRPCMaxStreams) {
		select {
		case err := <-answers:
			if err == nil {
				admitted++
			} else {
				refused[status.Code(err)]++
			}
		case <-ctx.Done():
			t.Fatalf("the node answered %d of the hostile streams before the test's time ran out", admitted+len(refused))
		}
	}
	t.Logf("hostile streams: %d admitted and never read, refused %v", admitted, refused)
	if admitted == 0 {
		t.Fatalf("the node admitted none of the hostile tails: the attack did not happen (refused %v)", refused)
	}

	// The honest tail, from the next sequence, on its own connection.
	tail, err := feedv1.NewFeedServiceClient(honest).TailSession(ctx, &feedv1.TailSessionRequest{SessionId: sid, FromSequence: held})
	if err != nil {
		t.Fatal(err)
	}
	seqs := make(chan int64, *honestAppends)
	tailErr := make(chan error, 1)
	go func() {
		for {
			ev, err := tail.Recv()
			if err != nil {
				tailErr <- err
				return
			}
			if m := ev.GetMessage(); m != nil {
				seqs <- m.GetSequence()
			}
		}
	}()
	small := strings.Repeat("y", 64<<10)
	var late []string
	for i := range *honestAppends {
		resp, err := api.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{
			{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER, Content: small}}})
		if err != nil {
			t.Fatalf("honest append %d: %v", i, err)
		}
		acked := time.Now()
		want := resp.GetMessages()[0].GetSequence()
		deadline := time.NewTimer(tailLatency)
		select {
		case got := <-seqs:
			if got != want {
				t.Fatalf("the honest tail delivered sequence %d, want %d", got, want)
			}
		case err := <-tailErr:
			t.Fatalf("the honest tail failed after %d messages: %v", i, err)
		case <-deadline.C:
			late = append(late, fmt.Sprint(want))
			select { // it must still come, in order
			case got := <-seqs:
				if got != want {
					t.Fatalf("the honest tail delivered sequence %d, want %d", got, want)
				}
				late[len(late)-1] += fmt.Sprintf(" (after %v)", time.Since(acked).Round(time.Millisecond))
			case err := <-tailErr:
				t.Fatalf("the honest tail failed after %d messages: %v", i, err)
			case <-ctx.Done():
				t.Fatalf("the honest tail never delivered sequence %d", want)
			}
		}
		deadline.Stop()
	}

	hwm, err := proc.Status(pid, "VmHWM")
	if err != nil {
		t.Fatalf("the node is gone: %v\n%s", err, deathNote(n.LogTail(1<<30)))
	}
	t.Logf("node: VmRSS %d MiB before the attack, VmHWM %d MiB (bound %d MiB)", startRSS>>20, hwm>>20, *tailsBound>>20)
	if len(late) > 0 {
		t.Errorf("%d of %d messages reached the honest tail later than %v after their append was acknowledged: sequences %s",
			len(late), *honestAppends, tailLatency, strings.Join(late, ", "))
	}
	if hwm >= *tailsBound {
		t.Errorf("the node's VmHWM reached %d MiB, above the bound of %d MiB", hwm>>20, *tailsBound>>20)
	}
}
