package session_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func delta(kv ...string) *sessionv1.StateDelta {
	d := &sessionv1.StateDelta{SetJson: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		d.SetJson[kv[i]] = kv[i+1]
	}
	return d
}

func decode(tb testing.TB, s string) map[string]any {
	tb.Helper()
	m := map[string]any{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		tb.Fatalf("state %q: %v", s, err)
	}
	return m
}

func (n *node) state(tb testing.TB, id string, scopes ...string) *sessionv1.GetStateResponse {
	tb.Helper()
	r, err := n.svc.GetState(ctxT(tb), &sessionv1.GetStateRequest{SessionId: id, Scopes: scopes})
	if err != nil {
		tb.Fatalf("GetState(%s): %v", id, err)
	}
	return r
}

// The stress test of issue 18: 64 goroutines append to one session, each
// append with a state delta and deltas to shared scopes, and a third of
// them conditional on the next sequence their sender saw last, so that
// conditional appends race with everything else. Afterwards:
//   - the session's state equals the acknowledged appends' deltas replayed
//     in sequence order (which, for one session, is its commit order);
//   - each scope key, written by one sender only, holds that sender's last
//     acknowledged value, and every acknowledged append's own key is there;
//   - every refused conditional append stored nothing: no message, no
//     session key, no scope key.
func TestStateStressWithConditionalAppends(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "stress")
	const senders, each = 64, 12
	type ack struct {
		seq   int64
		delta *sessionv1.StateDelta
	}
	var (
		mu      sync.Mutex
		acked   []ack
		refused []string // message ids of refused conditional appends
		lastVal = map[string]string{}
	)
	var wg sync.WaitGroup
	errc := make(chan error, senders)
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := int64(0)
			for i := range each {
				mid := fmt.Sprintf("g%02d-i%02d", g, i) // a client's own id
				val := fmt.Sprintf(`"%s"`, mid)
				req := &sessionv1.AppendRequest{
					SessionId: id,
					Messages:  []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: mid, MessageId: mid}},
					// "last" is written by everyone: only the
					// replay in order predicts it.
					StateDelta: delta("last", val, "own:"+mid, "true", "sender:"+fmt.Sprint(g), val, "temp:x", "1"),
					ScopeDeltas: []*sessionv1.ScopeDelta{
						{Scope: "app:stress", Delta: delta(fmt.Sprintf("g%02d", g), val, "own:"+mid, "true")},
						{Scope: fmt.Sprintf("user:stress/%d", g%4), Delta: delta(fmt.Sprintf("g%02d", g), val)},
					},
				}
				if i%3 == 2 {
					want := seen
					req.ExpectedNextSequence = &want
				}
				r, err := n.svc.Append(ctx, req)
				if err != nil {
					next, ok := persistence.NextSequenceOf(err)
					if req.ExpectedNextSequence == nil || errs.CodeOf(err) != errs.FailedPreconditionCode || !ok || next <= seen {
						errc <- fmt.Errorf("sender %d append %d: %v (next %d, %v)", g, i, err, next, ok)
						return
					}
					seen = next
					mu.Lock()
					refused = append(refused, mid)
					mu.Unlock()
					continue
				}
				seq := r.GetMessages()[0].GetSequence()
				if r.GetNextSequence() != seq+1 {
					errc <- fmt.Errorf("sender %d: next_sequence %d after sequence %d", g, r.GetNextSequence(), seq)
					return
				}
				seen = r.GetNextSequence()
				mu.Lock()
				acked = append(acked, ack{seq, req.StateDelta})
				lastVal[fmt.Sprintf("g%02d", g)] = val
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if len(refused) == 0 || len(acked) == 0 {
		t.Fatalf("%d acknowledged, %d refused: the race did not happen", len(acked), len(refused))
	}
	sort.Slice(acked, func(i, j int) bool { return acked[i].seq < acked[j].seq })
	replayed := ""
	for i, a := range acked {
		if a.seq != int64(i) {
			t.Fatalf("acknowledged sequences are not dense: %d at %d", a.seq, i)
		}
		d, err := persistence.NormalizeDelta("replay", a.delta)
		if err != nil {
			t.Fatal(err)
		}
		if replayed, err = persistence.ApplyDelta("replay", replayed, d); err != nil {
			t.Fatal(err)
		}
	}
	st := n.state(t, id, "app:stress", "user:stress/0", "user:stress/1", "user:stress/2", "user:stress/3")
	if st.GetNextSequence() != int64(len(acked)) {
		t.Fatalf("next sequence %d, %d acknowledged", st.GetNextSequence(), len(acked))
	}
	if got, want := decode(t, st.GetStateJson()), decode(t, replayed); !reflect.DeepEqual(got, want) {
		t.Fatalf("state differs from the replay:\n got %v\nwant %v", got, want)
	}
	if _, ok := decode(t, st.GetStateJson())["temp:x"]; ok {
		t.Fatal("a temp: key was stored")
	}
	app := decode(t, st.GetScopes()[0].GetStateJson())
	users := map[string]any{}
	for _, sc := range st.GetScopes()[1:] {
		for k, v := range decode(t, sc.GetStateJson()) {
			users[k] = v
		}
	}
	for k, v := range lastVal {
		var want any
		_ = json.Unmarshal([]byte(v), &want)
		if app[k] != want || users[k] != want {
			t.Fatalf("scope key %s: app %v, user %v, want %v", k, app[k], users[k], want)
		}
	}
	msgs := n.messages(t, id)
	stored := map[string]bool{}
	for _, m := range msgs {
		stored[m.GetMessageId()] = true
	}
	session := decode(t, st.GetStateJson())
	for _, mid := range refused {
		if stored[mid] || session["own:"+mid] != nil || app["own:"+mid] != nil {
			t.Fatalf("refused conditional append %s stored something", mid)
		}
	}
	if len(msgs) != len(acked) {
		t.Fatalf("%d messages stored, %d acknowledged", len(msgs), len(acked))
	}
	t.Logf("%d appends acknowledged, %d conditional appends refused", len(acked), len(refused))
}

func TestConditionalAppendAndUpdateState(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	zero, one := int64(0), int64(1)
	r, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("a")},
		StateDelta: delta("k", "1"), ExpectedNextSequence: &zero})
	if err != nil || r.GetNextSequence() != 1 {
		t.Fatalf("conditional append at 0: %v %v", r, err)
	}
	_, err = n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("b")},
		StateDelta: delta("k", "2"), ExpectedNextSequence: &zero})
	wantCode(t, err, errs.FailedPreconditionCode)
	if next, ok := persistence.NextSequenceOf(err); !ok || next != 1 {
		t.Fatalf("mismatch detail: %d %v (%v)", next, ok, err)
	}
	if got := n.get(t, id).GetMessageCount(); got != 1 {
		t.Fatalf("a refused append stored something: next %d", got)
	}
	u, err := n.svc.UpdateState(ctx, &sessionv1.UpdateStateRequest{SessionId: id,
		StateDelta:  &sessionv1.StateDelta{SetJson: map[string]string{"j": `{"a": [1, 2]}`}, Delete: []string{"k"}},
		ScopeDeltas: []*sessionv1.ScopeDelta{{Scope: "app:a", Delta: delta("x", `"y"`)}}, ExpectedNextSequence: &one})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(decode(t, u.GetStateJson()), map[string]any{"j": map[string]any{"a": []any{1.0, 2.0}}}) || u.GetNextSequence() != 1 {
		t.Fatalf("UpdateState: %v", u)
	}
	st := n.state(t, id, "app:a", "app:never")
	if st.GetStateJson() != u.GetStateJson() || st.GetNextSequence() != 1 || st.GetScopes()[0].GetStateJson() != `{"x":"y"}` ||
		st.GetScopes()[1].GetStateJson() != "{}" {
		t.Fatalf("GetState: %v", st)
	}
	// Bad deltas are INVALID_ARGUMENT and store nothing.
	for name, req := range map[string]*sessionv1.UpdateStateRequest{
		"not JSON":   {SessionId: id, StateDelta: delta("k", "{")},
		"empty key":  {SessionId: id, StateDelta: delta("", "1")},
		"only temp":  {SessionId: id, StateDelta: delta("temp:k", "1")},
		"bad scope":  {SessionId: id, ScopeDeltas: []*sessionv1.ScopeDelta{{Scope: "", Delta: delta("a", "1")}}},
		"two values": {SessionId: id, StateDelta: delta("k", "1 2")},
	} {
		_, err := n.svc.UpdateState(ctx, req)
		if errs.CodeOf(err) != errs.InvalidArgumentCode {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if again := n.state(t, id); again.GetStateJson() != st.GetStateJson() {
		t.Fatalf("a refused update changed the state: %s", again.GetStateJson())
	}
	// The state survives passivation: a new owner loads it.
	n.svc.PassivateAll()
	if err := session.WaitNoActors(ctx, n.svc); err != nil {
		t.Fatal(err)
	}
	u, err = n.svc.UpdateState(ctx, &sessionv1.UpdateStateRequest{SessionId: id, StateDelta: delta("more", "true")})
	if err != nil || !reflect.DeepEqual(decode(t, u.GetStateJson()), map[string]any{"j": map[string]any{"a": []any{1.0, 2.0}}, "more": true}) {
		t.Fatalf("after reload: %v %v", u, err)
	}
}

func TestClientKeysTimesAndFilters(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	c, err := n.svc.Create(ctx, &sessionv1.CreateSessionRequest{Namespace: "adk", ClientKey: "app/user/s1",
		StateDelta: delta("a", "1"), ScopeDeltas: []*sessionv1.ScopeDelta{{Scope: "app:app", Delta: delta("b", "2")}}})
	if err != nil {
		t.Fatal(err)
	}
	id := c.GetSession().GetSessionId()
	g, err := n.svc.Get(ctx, &sessionv1.GetSessionRequest{Namespace: "adk", ClientKey: "app/user/s1"})
	if err != nil || g.GetSession().GetSessionId() != id {
		t.Fatalf("Get by key: %v %v", g, err)
	}
	_, err = n.svc.Create(ctx, &sessionv1.CreateSessionRequest{Namespace: "adk", ClientKey: "app/user/s1"})
	wantCode(t, err, errs.AlreadyExistsCode)
	if st := n.state(t, id, "app:app"); st.GetStateJson() != `{"a":1}` || st.GetScopes()[0].GetStateJson() != `{"b":2}` {
		t.Fatalf("initial state: %v", st)
	}
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 6 {
		_, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{{
			Role: sessionv1.Role_ROLE_USER, Content: fmt.Sprint(i), MessageId: fmt.Sprintf("event%d", i),
			EventTime: timestamppb.New(base.Add(time.Duration(i) * time.Minute))}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A retry by the client's id is a duplicate; other content is refused.
	r, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{{
		Role: sessionv1.Role_ROLE_USER, Content: "2", MessageId: "event2", EventTime: timestamppb.New(base.Add(2 * time.Minute))}}})
	if err != nil || !r.GetDuplicate() || r.GetMessages()[0].GetSequence() != 2 {
		t.Fatalf("retry: %v %v", r, err)
	}
	_, err = n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{{
		Role: sessionv1.Role_ROLE_USER, Content: "other", MessageId: "event2"}}})
	wantCode(t, err, errs.AlreadyExistsCode)
	l, err := n.svc.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: id, AfterTime: timestamppb.New(base.Add(time.Minute)), Last: 2})
	if err != nil || len(l.GetMessages()) != 2 || l.GetMessages()[0].GetMessageId() != "event4" || l.GetMessages()[1].GetMessageId() != "event5" {
		t.Fatalf("last 2 after 1m: %v %v", l, err)
	}
	l, err = n.svc.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: id, BeforeTime: timestamppb.New(base.Add(2 * time.Minute))})
	if err != nil || len(l.GetMessages()) != 2 || !proto.Equal(l.GetMessages()[1].GetEventTime(), timestamppb.New(base.Add(time.Minute))) {
		t.Fatalf("before 2m: %v %v", l, err)
	}
}

func TestTruncateSnapshotAndExpiry(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{ExpirySweepInterval: -1}, nil)
	ctx := ctxT(t)
	defer session.SetTruncateChunk(session.SetTruncateChunk(3))
	id := n.create(t, "r")
	for i := range 10 {
		if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg(fmt.Sprint(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := n.svc.Truncate(ctx, &sessionv1.TruncateRequest{SessionId: id, ThroughSequence: 6})
	if err != nil || tr.GetMessagesRemoved() != 7 || tr.GetFirstSequence() != 7 {
		t.Fatalf("truncate (three chunks): %v %v", tr, err)
	}
	got := n.get(t, id)
	if got.GetFirstSequence() != 7 || got.GetMessageCount() != 10 || len(n.messages(t, id)) != 3 {
		t.Fatalf("after truncate: %v", got)
	}
	ten := int64(10)
	if r, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("x")}, ExpectedNextSequence: &ten}); err != nil || r.GetMessages()[0].GetSequence() != 10 {
		t.Fatalf("append after truncate: %v %v", r, err)
	}
	if _, err := n.svc.PutSnapshot(ctx, &sessionv1.PutSnapshotRequest{SessionId: id, Sequence: 9, Data: []byte("snap")}); err != nil {
		t.Fatal(err)
	}
	s, err := n.svc.GetSnapshot(ctx, &sessionv1.GetSnapshotRequest{SessionId: id})
	if err != nil || s.GetSnapshot().GetSequence() != 9 || string(s.GetSnapshot().GetData()) != "snap" {
		t.Fatalf("snapshot: %v %v", s, err)
	}
	if d, err := n.svc.DeleteSnapshot(ctx, &sessionv1.DeleteSnapshotRequest{SessionId: id, ThroughSequence: 9}); err != nil || !d.GetDeleted() {
		t.Fatalf("delete snapshot: %v %v", d, err)
	}

	// Expiry: a session past its expires_at is swept, with an audit
	// entry; one with a ttl still running is not, nor one whose expiry
	// was cleared. The owner decides with its own clock (a sweep that
	// lists a session whose expiry was just extended deletes nothing).
	c, err := n.svc.Create(ctx, &sessionv1.CreateSessionRequest{ExpiresAt: timestamppb.New(time.Now().Add(-time.Minute))})
	if err != nil {
		t.Fatal(err)
	}
	running, err := n.svc.Create(ctx, &sessionv1.CreateSessionRequest{Ttl: durationpb.New(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	gone, kept := c.GetSession().GetSessionId(), id
	if _, err := n.svc.SetExpiry(ctx, &sessionv1.SetExpiryRequest{SessionId: kept, ExpiresAt: timestamppb.New(time.Now().Add(-time.Minute))}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.svc.SetExpiry(ctx, &sessionv1.SetExpiryRequest{SessionId: kept, Clear: true}); err != nil {
		t.Fatal(err)
	}
	if k, err := session.SweepExpired(ctx, n.svc, time.Now()); err != nil || k != 1 {
		t.Fatalf("sweep: %d deleted, %v", k, err)
	}
	// Listed as expired by a sweep from the future, the running one is
	// still refused by its owner.
	if k, err := session.SweepExpired(ctx, n.svc, time.Now().Add(2*time.Hour)); err != nil || k != 0 {
		t.Fatalf("sweep from the future: %d deleted, %v", k, err)
	}
	if _, err := n.svc.Get(ctx, &sessionv1.GetSessionRequest{SessionId: gone}); errs.CodeOf(err) != errs.NotFoundCode {
		t.Fatalf("expired session: %v", err)
	}
	n.get(t, kept)
	n.get(t, running.GetSession().GetSessionId())
	entries, err := n.store.Reader().ListAudit(ctx, nil, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var sawExpired, sawTruncated bool
	for _, e := range entries {
		// The sweep deletes on the node's own behalf.
		sawExpired = sawExpired || e.GetEventType() == "session_deleted" && e.GetSessionId() == gone &&
			decode(t, e.GetDetailsJson())["reason"] == "expired" && e.GetPrincipal() == "node"
		sawTruncated = sawTruncated || e.GetEventType() == "session_truncated" && e.GetSessionId() == kept
	}
	if !sawExpired || !sawTruncated {
		t.Fatalf("audit: expired %v, truncated %v", sawExpired, sawTruncated)
	}
}
