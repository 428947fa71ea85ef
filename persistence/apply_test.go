package persistence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// script is a fake Attempt: each command's outcome is looked up by the
// command's plan id, and every call is logged, so a test can state the
// protocol as the sequence of calls it makes.
type script struct {
	fail      map[string]error
	finishErr error
	log       []string
}

func (s *script) Command(c persistence.Command) (persistence.Result, error) {
	id := c.(*persistence.PlanWrite).PlanID
	s.log = append(s.log, "cmd "+id)
	return persistence.Result{}, s.fail[id]
}
func (s *script) Savepoint() error              { s.log = append(s.log, "savepoint"); return nil }
func (s *script) RollbackToSavepoint() error    { s.log = append(s.log, "rollback to"); return nil }
func (s *script) ReleaseSavepoint() error       { s.log = append(s.log, "release"); return nil }
func (s *script) Mark() persistence.ChainMark   { return persistence.ChainMark{} }
func (s *script) Restore(persistence.ChainMark) { s.log = append(s.log, "restore") }
func (s *script) Finish() error                 { s.log = append(s.log, "finish"); return s.finishErr }
func batch(ids ...string) (out []persistence.Command) {
	for _, id := range ids {
		out = append(out, &persistence.PlanWrite{PlanID: id})
	}
	return out
}

func TestRunCommandsProtocol(t *testing.T) {
	stale := errs.FailedPrecondition("stale")
	io := errors.New("disk I/O error")
	cases := []struct {
		name       string
		fail       map[string]error
		finishErr  error
		savepoints bool
		step       persistence.Step
		log        string
		errAt      int // index of the command whose Result.Err is set, or -1
	}{
		{"all commit", nil, nil, false, persistence.Commit, "cmd a, cmd b, finish", -1},
		{"an own failure stops the optimistic attempt", map[string]error{"a": stale}, nil, false, persistence.Isolate, "cmd a", -1},
		{"a replay rolls it back alone", map[string]error{"a": stale}, nil, true, persistence.Commit,
			"savepoint, cmd a, rollback to, restore, savepoint, cmd b, release, finish", 0},
		{"a transaction failure abandons the attempt", map[string]error{"b": io}, nil, false, persistence.Abandon, "cmd a, cmd b", -1},
		{"and the replay", map[string]error{"b": io}, nil, true, persistence.Abandon,
			"savepoint, cmd a, release, savepoint, cmd b", -1},
		{"finish's own failure is isolated", nil, stale, false, persistence.Isolate, "cmd a, cmd b, finish", -1},
		{"finish's failure in a replay is the transaction's", nil, stale, true, persistence.Abandon,
			"savepoint, cmd a, release, savepoint, cmd b, release, finish", -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &script{fail: c.fail, finishErr: c.finishErr}
			res, step, err := persistence.RunCommands(context.Background(), s, batch("a", "b"), c.savepoints, nil)
			if step != c.step || strings.Join(s.log, ", ") != c.log {
				t.Fatalf("step %v, calls %q; want %v, %q", step, strings.Join(s.log, ", "), c.step, c.log)
			}
			if (step == persistence.Abandon) != (err != nil) {
				t.Fatalf("step %v with error %v", step, err)
			}
			for i, r := range res {
				if (r.Err != nil) != (i == c.errAt) {
					t.Fatalf("result %d: %v", i, r.Err)
				}
			}
		})
	}
}

func TestRunCommandsStopsOnACancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &script{}
	if _, step, err := persistence.RunCommands(ctx, s, batch("a"), false, nil); step != persistence.Abandon || !errors.Is(err, context.Canceled) || len(s.log) != 0 {
		t.Fatalf("step %v err %v calls %v", step, err, s.log)
	}
}

func TestRunCommandsAfterHookFailureIsTheCommands(t *testing.T) {
	s := &script{}
	after := func(i int) error { return errs.FailedPrecondition("pipelined check %d", i) }
	if _, step, _ := persistence.RunCommands(context.Background(), s, batch("a", "b"), false, after); step != persistence.Isolate {
		t.Fatalf("step %v, want Isolate", step)
	}
}
