package checker

import (
	"context"
	"fmt"
	"slices"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Suffix replacements in the load (issue 30): each client replaces the
// newest messages of a session of its own (LoadConfig.SuffixEvery):
// ReplaceSuffix removing the last 0..3 and storing 1..2 new ones, at the
// next sequence the client knows. A retry resends the same request (the
// same ids and expectation), which the node answers as a duplicate when
// the original committed. So once answered, the session's history is
// known exactly: the ledger keeps it as acknowledged, the removed messages
// legitimately gone. The verdict (checkSuffix) holds each session to it:
// the stored ids, in order, dense from 0, are the acknowledged history —
// or, for a session whose last replacement was refused for good, that
// history or the one it would have made.

// suffixLedger is the Ledger's part for replacements (under Ledger.mu).
type suffixLedger struct {
	// acked: session → its history (message ids) as acknowledged.
	acked map[string][]string
	// open: session → the history a replacement refused for good would
	// have made (either may be stored).
	open                   map[string][]string
	replaced, removedCount int
	bad                    []string // answers inconsistent in themselves
}

// SuffixSessionCreated records a session of the replacements.
func (l *Ledger) SuffixSessionCreated(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.suffix.acked == nil {
		l.suffix.acked, l.suffix.open = map[string][]string{}, map[string][]string{}
	}
	l.suffix.acked[id] = []string{}
}

// SuffixAcked records an acknowledged replacement's history and the
// next sequence it was answered.
func (l *Ledger) SuffixAcked(id string, history []string, removed int, next int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if next != int64(len(history)) {
		l.suffix.bad = append(l.suffix.bad, fmt.Sprintf("replacement in %s answered next sequence %d, want %d", id, next, len(history)))
	}
	l.suffix.acked[id] = history
	l.suffix.replaced++
	l.suffix.removedCount += removed
}

// SuffixOpen records a replacement refused for good: its session is
// either way from now on, and takes no more replacements.
func (l *Ledger) SuffixOpen(id string, history []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.suffix.open[id] = history
}

// SuffixSessions returns the replacements' sessions.
func (l *Ledger) SuffixSessions() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.suffix.acked))
	for id := range l.suffix.acked {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// replaceSuffix replaces the newest messages of the client's session
// until answered (see above).
func (c *client) replaceSuffix(ctx context.Context, n int) error {
	sid := c.ld.suffixIDs[c.id%len(c.ld.suffixIDs)]
	if c.suffixDone {
		return c.append(ctx, n)
	}
	cur := c.suffixHistory
	remove := c.rng.IntN(min(3, len(cur)) + 1)
	next := int64(len(cur))
	req := &sessionv1.ReplaceSuffixRequest{SessionId: sid, ExpectedNextSequence: &next,
		From: &sessionv1.ReplaceSuffixRequest_RemoveLast{RemoveLast: int64(remove)}}
	after := slices.Clone(cur[:len(cur)-remove])
	for k := range 1 + c.rng.IntN(2) {
		id := ids.New()
		req.Messages = append(req.Messages, &sessionv1.NewMessage{MessageId: id, Role: sessionv1.Role_ROLE_ASSISTANT,
			Content: fmt.Sprintf("client %d op %d replacement %d", c.id, n, k)})
		after = append(after, id)
	}
	var resp *sessionv1.ReplaceSuffixResponse
	var failed []codes.Code
	err := c.ld.call(ctx, "replace suffix of "+sid, &c.at, true, &failed, func(ctx context.Context, conn int, ready grpc.CallOption) error {
		var err error
		resp, err = c.ld.targets[conn].sessions.ReplaceSuffix(ctx, req, ready)
		return err
	})
	if err != nil {
		c.suffixDone = true
		c.ld.ledger.SuffixOpen(sid, after)
		return err
	}
	c.ld.ledger.RetryAnswered("replacement of "+req.Messages[0].MessageId+" in "+sid, failed, resp.GetDuplicate())
	c.suffixHistory = after
	c.ld.ledger.SuffixAcked(sid, after, remove, resp.GetNextSequence())
	return nil
}

// checkSuffix judges the replacements' sessions (see above); l.mu is held.
func checkSuffix(l *Ledger, o *Observed, r *Report) {
	r.SuffixReplaced, r.SuffixRemoved = l.suffix.replaced, l.suffix.removedCount
	for _, b := range l.suffix.bad {
		r.problem(&r.BadAcks, "%s", b)
	}
	for sid, want := range l.suffix.acked {
		ms, ok := o.Suffix[sid]
		if !ok {
			r.problem(&r.Lost, "suffix session %s: not found", sid)
			continue
		}
		got := make([]string, len(ms))
		for i, m := range ms {
			got[i] = m.GetMessageId()
			if m.GetSequence() != int64(i) {
				r.problem(&r.Gaps, "suffix session %s: sequence %d at index %d", sid, m.GetSequence(), i)
			}
		}
		if slices.Equal(got, want) {
			continue
		}
		if alt, open := l.suffix.open[sid]; open && slices.Equal(got, alt) {
			continue
		}
		for _, id := range want {
			if !slices.Contains(got, id) {
				r.problem(&r.Lost, "suffix session %s: acknowledged message %s not stored", sid, id)
				break
			}
		}
		r.problem(&r.Changed, "suffix session %s: stored %v, acknowledged %v", sid, got, want)
	}
}
