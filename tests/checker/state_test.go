package checker_test

import (
	"encoding/json"
	"testing"

	"github.com/agentstate/agentstate/tests/checker"
)

// withState fills the world's session view as a correct node shows it:
// the state its turns' deltas replay to, in sequence order, and the scope
// key of its last turn.
func withState(t *testing.T, w *world) {
	t.Helper()
	state := map[string]any{}
	for _, turn := range w.turns {
		for k, v := range turn.Request().GetStateDelta().GetSetJson() {
			var x any
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				t.Fatal(err)
			}
			state[k] = x
		}
	}
	b, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	v := w.o.Sessions[w.sid]
	v.State, v.StateNext = string(b), v.Session.MessageCount
	v.ScopeValue = w.turns[len(w.turns)-1].Messages[0].ID
}

// truncateFirst removes the messages below first from the view, as a
// truncation through first-1 does.
func truncateFirst(w *world, first int64) {
	v := w.o.Sessions[w.sid]
	v.Messages = v.Messages[first:]
	v.Session.FirstSequence = first
}

func TestCheckStateAndTruncation(t *testing.T) {
	clean := func(t *testing.T) *world {
		w := newWorld(t)
		withState(t, w)
		return w
	}
	w := clean(t)
	if r := checker.Check(w.l, w.o); r.Err() != nil {
		t.Fatalf("a correct observation with state was judged wrong: %v", r.Err())
	}
	w = clean(t)
	w.l.TruncateSent(w.sid, 3)
	w.l.TruncateAcked(w.sid, 3)
	truncateFirst(w, 4)
	if r := checker.Check(w.l, w.o); r.Err() != nil || r.Truncated != 4 {
		t.Fatalf("a correct truncation was judged wrong: %v (truncated %d)", r.Err(), r.Truncated)
	}
	for _, c := range []struct {
		name  string
		spoil func(w *world)
		field func(r *checker.Report) int
	}{
		{"state lost a turn's delta", func(w *world) { w.o.Sessions[w.sid].State = `{}` }, stateDiffers},
		{"scope key of an older turn", func(w *world) { w.o.Sessions[w.sid].ScopeValue = w.turns[0].Messages[0].ID }, stateDiffers},
		{"state read at another sequence", func(w *world) { w.o.Sessions[w.sid].StateNext-- }, stateDiffers},
		{"messages gone without a truncation", func(w *world) { truncateFirst(w, 2) }, lost},
		{"truncated past what was sent", func(w *world) {
			w.l.TruncateSent(w.sid, 1)
			truncateFirst(w, 4)
		}, lost},
		{"acknowledged truncation undone", func(w *world) {
			w.l.TruncateSent(w.sid, 3)
			w.l.TruncateAcked(w.sid, 3)
			truncateFirst(w, 2)
		}, lost},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := clean(t)
			c.spoil(w)
			r := checker.Check(w.l, w.o)
			if got := c.field(&r); got != 1 || r.Violations() != 1 {
				t.Fatalf("counted %d (violations %d), want exactly 1: %v", got, r.Violations(), r.Problems)
			}
		})
	}
}

func stateDiffers(r *checker.Report) int { return r.StateDiffers }
