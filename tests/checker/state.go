package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"reflect"
	"slices"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
)

// Session state and truncation under crashes (issue 18). Every append
// carries a state delta and a delta to one shared scope, both a pure
// function of the turn (so a retry or a replay carries the same ones), and
// clients now and then truncate a session through a sequence they saw
// acknowledged. After the run:
//
//   - the session's state equals the deltas of its stored turns replayed
//     in sequence order (every sent turn ends acknowledged, so the ledger
//     knows each turn's sequence, also below a truncation);
//   - the scope's key for the session holds the delta of its
//     highest-sequence turn (only that session's turns write the key);
//   - the first stored sequence is past every acknowledged truncation and
//     within the truncations sent: nothing acknowledged was removed
//     otherwise.

// stateScope is the shared scope every append to a session of namespace ns
// writes, one key per session ("" is "checker").
func stateScope(ns string) string {
	if ns == "" {
		ns = "checker"
	}
	return "app:" + ns
}

// turnDelta is the state delta a turn carries: "last" is its first
// message id, and one of eight slots (by that id's hash) holds it too, so
// the replay has several keys to get wrong.
func turnDelta(t Turn) *sessionv1.StateDelta {
	if len(t.Messages) == 0 {
		return nil
	}
	id := t.Messages[0].ID
	h := fnv.New32a()
	h.Write([]byte(id))
	v := fmt.Sprintf("%q", id)
	return &sessionv1.StateDelta{SetJson: map[string]string{"last": v, fmt.Sprintf("slot%d", h.Sum32()%8): v}}
}

func turnScope(t Turn) []*sessionv1.ScopeDelta {
	if len(t.Messages) == 0 {
		return nil
	}
	return []*sessionv1.ScopeDelta{{Scope: stateScope(t.Namespace), Delta: &sessionv1.StateDelta{
		SetJson: map[string]string{t.Session: fmt.Sprintf("%q", t.Messages[0].ID)}}}}
}

// TruncateSent records an attempt to truncate sid through seq; its outcome
// may stay unknown, so it bounds what may be gone.
func (l *Ledger) TruncateSent(sid string, seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.truncSent == nil {
		l.truncSent, l.truncAcked = map[string]int64{}, map[string]int64{}
	}
	if cur, ok := l.truncSent[sid]; !ok || seq > cur {
		l.truncSent[sid] = seq
	}
}

// TruncateAcked records an acknowledged truncation of sid through seq.
func (l *Ledger) TruncateAcked(sid string, seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.truncAcked[sid]; !ok || seq > cur {
		l.truncAcked[sid] = seq
	}
}

// ackSequences advances sid's acknowledged prefix by got (l.mu held).
func (l *Ledger) ackSequences(sid string, got []MsgSeq) {
	if l.ackedSeqs == nil {
		l.ackedSeqs, l.ackedPrefix = map[string]map[int64]bool{}, map[string]int64{}
	}
	if _, ok := l.ackedPrefix[sid]; !ok {
		l.ackedPrefix[sid] = -1
		l.ackedSeqs[sid] = map[int64]bool{}
	}
	for _, g := range got {
		if g.Seq > l.ackedPrefix[sid] {
			l.ackedSeqs[sid][g.Seq] = true
		}
	}
	for l.ackedSeqs[sid][l.ackedPrefix[sid]+1] {
		delete(l.ackedSeqs[sid], l.ackedPrefix[sid]+1)
		l.ackedPrefix[sid]++
	}
}

// truncatable is the highest sequence of sid a truncation may remove: one
// below which every sequence is acknowledged. A message id is idempotent
// only while it is stored, so a truncation must not remove a turn whose
// sender may still retry it (its answer lost in a kill): that retry would
// be stored again, as a new turn, as agentstate documents.
func (l *Ledger) truncatable(sid string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.ackedPrefix[sid]; ok {
		return p
	}
	return -1
}

// truncatedThrough is the highest sequence of sid a truncation was sent
// through (-1: none).
func (l *Ledger) truncatedThrough(sid string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.truncSent[sid]; ok {
		return s
	}
	return -1
}

// truncate removes, through the node, sid's messages up to the highest
// sequence this client saw acknowledged in it and below which every
// sequence is acknowledged. It holds the load's replay lock exclusively:
// a replay of a turn the truncation removes would be a new turn (see
// truncatable), so replays check, under the shared lock, that their turn
// is above every truncation sent.
func (c *client) truncate(ctx context.Context, n int) error {
	if len(c.seen) == 0 {
		return c.append(ctx, n)
	}
	sids := slices.Sorted(maps.Keys(c.seen))
	sid := sids[c.rng.IntN(len(sids))]
	through := min(c.seen[sid], c.ld.ledger.truncatable(sid))
	if through < 0 {
		return c.append(ctx, n)
	}
	c.ld.replays.Lock()
	defer c.ld.replays.Unlock()
	req := &sessionv1.TruncateRequest{SessionId: sid, ThroughSequence: through}
	err := c.ld.call(ctx, "truncate "+sid, &c.at, true, nil, func(ctx context.Context, conn int, ready grpc.CallOption) error {
		c.ld.ledger.TruncateSent(sid, req.ThroughSequence)
		_, err := c.ld.targets[conn].sessions.Truncate(ctx, req, ready)
		return err
	})
	if err != nil {
		return err
	}
	c.ld.ledger.TruncateAcked(sid, req.ThroughSequence)
	return nil
}

// readState reads a session's state and its key of the shared scope.
func readState(ctx context.Context, c sessionv1.SessionServiceClient, v *SessionView) error {
	st, err := c.GetState(ctx, &sessionv1.GetStateRequest{SessionId: v.Session.GetSessionId(), Scopes: []string{stateScope(v.Session.GetNamespace())}},
		grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("checker: state of %s: %w", v.Session.GetSessionId(), err)
	}
	v.State = st.GetStateJson()
	v.StateNext = st.GetNextSequence()
	scope := map[string]any{}
	if err := json.Unmarshal([]byte(st.GetScopes()[0].GetStateJson()), &scope); err != nil {
		return fmt.Errorf("checker: scope %s: %w", stateScope(v.Session.GetNamespace()), err)
	}
	if s, ok := scope[v.Session.GetSessionId()].(string); ok {
		v.ScopeValue = s
	}
	return nil
}

// checkState compares sid's state, scope key and truncation point with
// the ledger's acknowledged turns and truncations.
func checkState(l *Ledger, sid string, v *SessionView, r *Report) {
	type turnAt struct {
		seq int64
		t   Turn
	}
	var turns []turnAt
	seen := map[string]bool{}
	for _, a := range l.appends {
		if a.Turn.Session != sid || len(a.Got) == 0 || seen[a.Got[0].ID] {
			continue
		}
		seen[a.Got[0].ID] = true
		turns = append(turns, turnAt{a.Got[0].Seq, a.Turn})
	}
	slices.SortFunc(turns, func(a, b turnAt) int { return int(a.seq - b.seq) })
	want := map[string]any{}
	scopeWant := ""
	for _, ta := range turns {
		for k, val := range turnDelta(ta.t).GetSetJson() {
			var x any
			_ = json.Unmarshal([]byte(val), &x)
			want[k] = x
		}
		scopeWant = ta.t.Messages[0].ID
	}
	got := map[string]any{}
	if err := json.Unmarshal([]byte(v.State), &got); err != nil {
		r.problem(&r.StateDiffers, "session %s: state %q is not a JSON object", sid, v.State)
		return
	}
	if !reflect.DeepEqual(got, want) {
		r.problem(&r.StateDiffers, "session %s: state %s, but its %d acknowledged turns replay to %v", sid, v.State, len(turns), want)
	}
	if v.ScopeValue != scopeWant {
		r.problem(&r.StateDiffers, "session %s: scope %s holds %q, its last turn is %q", sid, stateScope(v.Session.GetNamespace()), v.ScopeValue, scopeWant)
	}
	if v.StateNext != v.Session.GetMessageCount() {
		r.problem(&r.StateDiffers, "session %s: state read at next sequence %d, the session's is %d", sid, v.StateNext, v.Session.GetMessageCount())
	}
	first := v.Session.GetFirstSequence()
	if acked, ok := l.truncAcked[sid]; ok && first <= acked {
		r.problem(&r.Lost, "session %s: truncation through %d acknowledged, but the first sequence is %d", sid, acked, first)
	}
	sent, ok := l.truncSent[sid]
	if !ok {
		sent = -1
	}
	if first > sent+1 {
		r.problem(&r.Lost, "session %s: messages up to %d are gone, but truncations were sent through %d at most", sid, first-1, sent)
	}
	r.Truncated += int(first)
}
