package session_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

// stressRun has senders goroutines append each messages, sender g's i-th
// to sessions[(g*each+i) % len(sessions)], and checks the outcome: every
// session's sequences are exactly 0..n-1, every message is stored once, the
// stored order is sequence order, each answer names the stored message, and
// each sender saw its sequences per session increase (acknowledgement
// order is sequence order). passivateEvery > 0 forces PassivateAll after
// every that many acknowledged appends.
func stressRun(t *testing.T, n *node, sessions []string, senders, each, passivateEvery int) {
	t.Helper()
	ctx := ctxT(t)
	type ack struct {
		session string
		seq     int64
		id      string
	}
	acks := make([][]ack, senders)
	var acked atomic.Int64
	kick := make(chan struct{}, 1)
	stopPassivator := make(chan struct{})
	passivated := make(chan int)
	go func() {
		count := 0
		for {
			select {
			case <-kick:
				n.svc.PassivateAll()
				count++
			case <-stopPassivator:
				passivated <- count
				return
			}
		}
	}()

	var wg sync.WaitGroup
	errc := make(chan error, senders)
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			mine := make([]ack, 0, each)
			for i := 0; i < each; i++ {
				sid := sessions[(g*each+i)%len(sessions)]
				r, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{userMsg(fmt.Sprintf("%d/%d", g, i))}})
				if err != nil {
					errc <- fmt.Errorf("sender %d append %d: %w", g, i, err)
					return
				}
				m := r.GetMessages()[0]
				mine = append(mine, ack{sid, m.GetSequence(), m.GetMessageId()})
				if k := acked.Add(1); passivateEvery > 0 && k%int64(passivateEvery) == 0 {
					select {
					case kick <- struct{}{}:
					default:
					}
				}
			}
			acks[g] = mine
		}(g)
	}
	wg.Wait()
	close(stopPassivator)
	passivations := <-passivated
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	stored := map[string]map[int64]*sessionv1.Message{}
	total := 0
	for _, sid := range sessions {
		msgs := n.messages(t, sid)
		checkDense(t, msgs)
		if got := n.get(t, sid).GetMessageCount(); got != int64(len(msgs)) {
			t.Fatalf("session %s: message_count %d, %d messages", sid, got, len(msgs))
		}
		bySeq := make(map[int64]*sessionv1.Message, len(msgs))
		for _, m := range msgs {
			bySeq[m.GetSequence()] = m
		}
		stored[sid] = bySeq
		total += len(msgs)
	}
	if total != senders*each {
		t.Fatalf("stored %d messages, want %d", total, senders*each)
	}
	seen := make(map[string]bool, total)
	for g, mine := range acks {
		last := map[string]int64{}
		for i, a := range mine {
			m := stored[a.session][a.seq]
			if m == nil || m.GetMessageId() != a.id || m.GetContent() != fmt.Sprintf("%d/%d", g, i) {
				t.Fatalf("sender %d append %d: answered sequence %d of %s, stored %v", g, i, a.seq, a.session, m)
			}
			if p, ok := last[a.session]; ok && a.seq <= p {
				t.Fatalf("sender %d: sequence %d acknowledged after %d in %s", g, a.seq, p, a.session)
			}
			last[a.session] = a.seq
			if seen[m.GetContent()] {
				t.Fatalf("message %s stored twice", m.GetContent())
			}
			seen[m.GetContent()] = true
		}
	}
	if passivateEvery > 0 {
		if passivations == 0 {
			t.Fatal("no passivation was forced")
		}
		if act := session.Activations(n.svc); act <= int64(len(sessions)) {
			t.Fatalf("%d activations for %d sessions: passivation never took effect", act, len(sessions))
		}
		t.Logf("%d forced passivations, %d activations", passivations, session.Activations(n.svc))
	}
}

func createSessions(t *testing.T, n *node, count int) []string {
	out := make([]string, count)
	for i := range out {
		out[i] = n.create(t, "stress")
	}
	return out
}

// The case as written: 64 goroutines × 1,000 appends to one session.
func TestStressOneSession(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	stressRun(t, n, createSessions(t, n, 1), 64, 1000, 0)
}

// 64 goroutines spread 16,000 appends over 1,000 sessions (16 each, from
// different senders): scaled from 64 × 1,000 to keep the -race run short
// on two shared cores; the single-session test keeps the full size.
func TestStressManySessions(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	stressRun(t, n, createSessions(t, n, 1000), 64, 250, 0)
}

// The single-session case with passivation forced every 4,000 appends, and
// the many-sessions case with it forced every 2,000: every reactivated actor
// must continue at the stored maximum + 1.
func TestStressWithPassivation(t *testing.T) {
	t.Run("one session", func(t *testing.T) {
		n := startNode(t, memURL(t), session.Config{}, nil)
		stressRun(t, n, createSessions(t, n, 1), 64, 1000, 4000)
	})
	t.Run("1000 sessions", func(t *testing.T) {
		n := startNode(t, memURL(t), session.Config{}, nil)
		stressRun(t, n, createSessions(t, n, 1000), 64, 250, 2000)
	})
}

// A passivation storm: with a 1 ms idle timeout, owners passivate between
// almost every two requests of a session while 32 senders append to 16
// sessions, through the directory and through the live owners' fast path
// alike. Nothing is lost or reordered (stressRun's checks), owners did
// come and go, and the race detector stays clean: the owners' idle timer
// is the project's own, not Proto.Actor's receive timeout, whose timer
// raced under -race at such timeouts (issue 15).
func TestPassivationStormWithAVeryShortIdleTimeout(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{IdleTimeout: time.Millisecond}, nil)
	sessions := createSessions(t, n, 16)
	stressRun(t, n, sessions, 32, 100, 0)
	if act := session.Activations(n.svc); act <= int64(len(sessions)) {
		t.Fatalf("%d activations for %d sessions: no owner passivated in the storm", act, len(sessions))
	}
	t.Logf("%d activations for %d sessions", session.Activations(n.svc), len(sessions))
}
