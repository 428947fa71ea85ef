package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
)

// The feed peer: this test binary re-run with feedPeerEnv set is a
// Proto.Actor node whose actor subscribes to a session's tail on the node
// under test over the remote endpoint (a remote PID), acknowledging each
// event. It prints {"step":"subscribed"}, then one {"seq":N} per message,
// and exits after feedPeerWant messages.
const (
	feedPeerEnv     = "E2E_FEED_PEER" // the node's remote address
	feedPeerSession = "E2E_FEED_PEER_SESSION"
	feedPeerWant    = "E2E_FEED_PEER_WANT"
)

type feedPeerLine struct {
	Step string `json:"step,omitempty"`
	Seq  *int64 `json:"seq,omitempty"`
	Err  string `json:"err,omitempty"`
}

type feedSubscriber struct {
	feed *actor.PID
	req  *feedv1.TailSessionRequest
	out  chan feedPeerLine
}

func (s *feedSubscriber) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Request(s.feed, s.req)
	case *feedv1.Subscribed:
		s.out <- feedPeerLine{Step: "subscribed"}
	case *feedv1.SessionEvent:
		ctx.Send(s.feed, &feedv1.Ack{SubscriptionId: m.GetSubscriptionId(), Events: 1})
		if msg := m.GetMessage(); msg != nil {
			seq := msg.GetSequence()
			s.out <- feedPeerLine{Seq: &seq}
		}
	case *commonv1.Error:
		s.out <- feedPeerLine{Err: m.GetMessage()}
	case *feedv1.SubscriptionFailed:
		s.out <- feedPeerLine{Err: m.GetError().GetMessage()}
	}
}

func runFeedPeer() int {
	want, _ := strconv.Atoi(os.Getenv(feedPeerWant))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0))
	r.Start()
	out := make(chan feedPeerLine, 1024)
	sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &feedSubscriber{feed: actor.NewPID(os.Getenv(feedPeerEnv), "feed"), out: out,
			req: &feedv1.TailSessionRequest{SessionId: os.Getenv(feedPeerSession), Window: 2}}
	}))
	enc := json.NewEncoder(os.Stdout)
	timeout := time.After(2 * time.Minute)
	for got := 0; got < want; {
		select {
		case l := <-out:
			enc.Encode(l)
			if l.Err != "" {
				return 1
			}
			if l.Seq != nil {
				got++
			}
		case <-timeout:
			fmt.Fprintln(os.Stderr, "feed peer: timed out")
			return 1
		}
	}
	// Exiting without unsubscribing: the node must notice the peer is
	// gone (its remote endpoint terminates) and end the subscription.
	return 0
}

// A remote PID subscribes to a session's tail through the feed actor,
// receives the stored messages and the ones appended while it follows, in
// order, under an acknowledgement window of 2; when its process exits the
// node ends the subscription.
func TestRemoteActorTailsASession(t *testing.T) {
	n := startNode(t, "--remote-addr", "127.0.0.1:0", "--insecure-remote-plaintext-loopback")
	ctx := ctxT(t)
	api := sessionv1.NewSessionServiceClient(n.conn())
	r, err := api.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "remote-feed"})
	if err != nil {
		t.Fatal(err)
	}
	sid := r.GetSession().GetSessionId()
	appendN := func(k int) error {
		for i := 0; i < k; i++ {
			if _, err := api.Append(ctx, &sessionv1.AppendRequest{SessionId: sid,
				Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "m"}}}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := appendN(5); err != nil {
		t.Fatal(err)
	}
	appended := make(chan error, 1)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(pctx, exe, "-test.run=^$")
	cmd.Env = append(cleanEnv(), feedPeerEnv+"="+n.addrs["remote_addr"], feedPeerSession+"="+sid, feedPeerWant+"=10")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var l feedPeerLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("peer line %q: %v", sc.Text(), err)
		}
		switch {
		case l.Err != "":
			t.Fatalf("peer: %s", l.Err)
		case l.Step == "subscribed":
			go func() { appended <- appendN(5) }() // while the remote subscriber follows
		case l.Seq != nil:
			seqs = append(seqs, *l.Seq)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("peer: %v\n%s", err, stderr.String())
	}
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		if s != int64(i) {
			t.Fatalf("remote subscriber got sequences %v, want 0..9", seqs)
		}
	}
	if len(seqs) != 10 {
		t.Fatalf("remote subscriber got %d messages, want 10", len(seqs))
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, metrics := n.httpGet("/metrics")
		if strings.Contains(metrics, "\nagentstate_feed_tails 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gone peer's subscription is still open:\n%s", grepLines(metrics, "feed_tails"))
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, not ordering events
	}
	if code := n.terminate(60 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}
