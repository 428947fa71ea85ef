package journal_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/journal"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const waitLimit = 30 * time.Second

// recovery is what one incarnation of a recorder recovered.
type recovery struct {
	values       []string
	fromSnapshot int
}

// hooked makes recorders that report each recovery on the channel.
func hooked(truncate bool, recoveries chan<- recovery) func() *recorder {
	return func() *recorder {
		return &recorder{truncate: truncate, recovered: func(r *recorder) {
			recoveries <- recovery{values: slices.Clone(r.values), fromSnapshot: r.fromSnapshot}
		}}
	}
}

func nextRecovery(t *testing.T, ch <-chan recovery) recovery {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitLimit):
		t.Fatal("no recovery within the limit")
		return recovery{}
	}
}

// command sends v to the recorder and returns the index its event got.
func command(t *testing.T, root *actor.RootContext, pid *actor.PID, v string) int {
	t.Helper()
	res, err := root.RequestFuture(pid, wrapperspb.String(v), waitLimit).Result()
	if err != nil {
		t.Fatalf("command %q: %v", v, err)
	}
	return int(res.(*wrapperspb.Int64Value).GetValue())
}

// A recorder stopped and spawned again recovers its state from the
// snapshot and the events after it; the events the snapshot covers were
// deleted, and the index goes on where it was.
func TestMixinRecoversFromSnapshotAndEvents(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) { mixinRecovers(t, startSQLite(t)) })
	t.Run("Postgres", func(t *testing.T) { mixinRecovers(t, startPostgres(t)) })
}

func mixinRecovers(t *testing.T, n *testNode) {
	j := journal.New(n.node.Sessions(), journal.Config{SnapshotInterval: 4})
	recoveries := make(chan recovery, 4)
	props := recorderProps(j, hooked(true, recoveries))
	root := n.sys.Root

	pid, err := root.SpawnNamed(props, "rec")
	if err != nil {
		t.Fatal(err)
	}
	if r := nextRecovery(t, recoveries); len(r.values) != 0 || r.fromSnapshot != -1 {
		t.Fatalf("first start recovered %+v, want nothing", r)
	}
	var want []string
	for i := range 10 {
		v := string(rune('a' + i))
		want = append(want, v)
		if idx := command(t, root, pid, v); idx != i {
			t.Fatalf("command %d got index %d", i, idx)
		}
	}
	if err := root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	// Snapshots were taken at indexes 0, 4 and 8, each covering the
	// events before it, which were then deleted.
	sess := sessionOf(t, n, "protoactor", "rec")
	if sess.GetFirstSequence() != 8 || sess.GetMessageCount() != 10 {
		t.Fatalf("session: first sequence %d, next %d; want 8, 10", sess.GetFirstSequence(), sess.GetMessageCount())
	}

	pid, err = root.SpawnNamed(props, "rec")
	if err != nil {
		t.Fatal(err)
	}
	r := nextRecovery(t, recoveries)
	if !slices.Equal(r.values, want) || r.fromSnapshot != 8 {
		t.Fatalf("recovered %q (%d from the snapshot), want %q (8)", r.values, r.fromSnapshot, want)
	}
	if idx := command(t, root, pid, "k"); idx != 10 {
		t.Fatalf("after recovery the next event got index %d, want 10", idx)
	}
	root.PoisonFuture(pid).Wait()
}

// flaky fails the next Append it is told to, as a disk error or a
// stopping node would, and stores nothing of it.
type flaky struct {
	journal.Sessions
	failNext atomic.Bool
}

func (f *flaky) Append(ctx context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	if f.failNext.CompareAndSwap(true, false) {
		return nil, errs.Unavailable("injected: the write failed")
	}
	return f.Sessions.Append(ctx, req)
}

// supervised spawns a recorder under a parent whose supervisor reports
// each failure's reason and restarts the child; it returns the child.
func supervised(t *testing.T, root *actor.RootContext, props *actor.Props, reasons chan<- interface{}) *actor.PID {
	t.Helper()
	strategy := actor.NewOneForOneStrategy(10, time.Minute, func(reason interface{}) actor.Directive {
		reasons <- reason
		return actor.RestartDirective
	})
	var child *actor.PID
	parent := actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			child = ctx.SpawnPrefix(props, "rec")
		case *wrapperspb.StringValue:
			ctx.Respond(child)
		}
	}, actor.WithSupervisor(strategy))
	ppid := root.Spawn(parent)
	t.Cleanup(func() { root.PoisonFuture(ppid).Wait() })
	res, err := root.RequestFuture(ppid, wrapperspb.String("child?"), waitLimit).Result()
	if err != nil {
		t.Fatal(err)
	}
	return res.(*actor.PID)
}

func nextReason(t *testing.T, ch <-chan interface{}) *journal.Error {
	t.Helper()
	select {
	case r := <-ch:
		err, _ := r.(error)
		var je *journal.Error
		if !errors.As(err, &je) {
			t.Fatalf("the actor failed with %T %v, want a *journal.Error", r, r)
		}
		return je
	case <-time.After(waitLimit):
		t.Fatal("no failure within the limit")
		return nil
	}
}

// A write that fails does not let the actor go on: it panics, its
// supervisor restarts it, and it recovers what the store holds — without
// the event that failed — and goes on from there.
func TestFailedWriteRestartsTheActor(t *testing.T) {
	n := startSQLite(t)
	svc := &flaky{Sessions: n.node.Sessions()}
	j := journal.New(svc, journal.Config{SnapshotInterval: 100})
	recoveries := make(chan recovery, 4)
	reasons := make(chan interface{}, 4)
	root := n.sys.Root
	pid := supervised(t, root, recorderProps(j, hooked(false, recoveries)), reasons)
	nextRecovery(t, recoveries)

	if idx := command(t, root, pid, "a"); idx != 0 {
		t.Fatalf("a got index %d", idx)
	}
	svc.failNext.Store(true)
	root.Send(pid, wrapperspb.String("lost"))
	je := nextReason(t, reasons)
	if je.Op != "persist event" || je.Index != 1 || errs.CodeOf(je) != errs.UnavailableCode {
		t.Errorf("failure %v, want the persist of index 1, UNAVAILABLE", je)
	}
	if r := nextRecovery(t, recoveries); !slices.Equal(r.values, []string{"a"}) {
		t.Fatalf("recovered %q after the failed write, want [a]", r.values)
	}
	if idx := command(t, root, pid, "b"); idx != 1 {
		t.Fatalf("b got index %d, want 1", idx)
	}
	wantStrings(t, "stored events", events(t, j, pid.Id, 0, 0), []string{"a", "b"})
}

// Another writer took the actor's next index (a second process running
// the same actor): the actor's write is refused, storing nothing, and the
// restarted actor recovers the other writer's event too.
func TestForeignWriteRefusesTheActor(t *testing.T) {
	n := startSQLite(t)
	j := journal.New(n.node.Sessions(), journal.Config{SnapshotInterval: 100})
	recoveries := make(chan recovery, 4)
	reasons := make(chan interface{}, 4)
	root := n.sys.Root
	pid := supervised(t, root, recorderProps(j, hooked(false, recoveries)), reasons)
	nextRecovery(t, recoveries)

	command(t, root, pid, "a")
	journal.New(n.node.Sessions(), journal.Config{}).PersistEvent(pid.Id, 1, event("elsewhere"))
	root.Send(pid, wrapperspb.String("refused"))
	je := nextReason(t, reasons)
	if je.Index != 1 || errs.CodeOf(je) != errs.FailedPreconditionCode {
		t.Errorf("failure %v, want index 1 refused FAILED_PRECONDITION", je)
	}
	if r := nextRecovery(t, recoveries); !slices.Equal(r.values, []string{"a", "elsewhere"}) {
		t.Fatalf("recovered %q, want [a elsewhere]", r.values)
	}
	if idx := command(t, root, pid, "b"); idx != 2 {
		t.Fatalf("b got index %d, want 2", idx)
	}
	wantStrings(t, "stored events", events(t, j, pid.Id, 0, 0), []string{"a", "elsewhere", "b"})
}

// Many actors persisting at once through one journal (their writes share
// the writer's transactions) each recover exactly their own history.
func TestManyActorsOneJournal(t *testing.T) {
	n := startSQLite(t)
	j := journal.New(n.node.Sessions(), journal.Config{SnapshotInterval: 8})
	const actorsN, eventsN = 16, 25
	recoveries := make(chan recovery, 2*actorsN)
	props := recorderProps(j, hooked(true, recoveries))
	root := n.sys.Root
	pids := make([]*actor.PID, actorsN)
	for i := range pids {
		var err error
		if pids[i], err = root.SpawnNamed(props, fmt.Sprintf("worker-%d", i)); err != nil {
			t.Fatal(err)
		}
		nextRecovery(t, recoveries)
	}
	var wg sync.WaitGroup
	failures := make(chan string, actorsN)
	for i, pid := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range eventsN {
				res, err := root.RequestFuture(pid, wrapperspb.String(fmt.Sprintf("w%d-%d", i, k)), waitLimit).Result()
				if err != nil || res.(*wrapperspb.Int64Value).GetValue() != int64(k) {
					failures <- fmt.Sprintf("worker %d event %d: %v %v", i, k, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	for i, pid := range pids {
		root.PoisonFuture(pid).Wait()
		if _, err := root.SpawnNamed(props, pid.Id); err != nil {
			t.Fatal(err)
		}
		r := nextRecovery(t, recoveries)
		var want []string
		for k := range eventsN {
			want = append(want, fmt.Sprintf("w%d-%d", i, k))
		}
		if !slices.Equal(r.values, want) || r.fromSnapshot != 24 {
			t.Errorf("worker %d recovered %q (%d from the snapshot), want its %d events (24)", i, r.values, r.fromSnapshot, eventsN)
		}
	}
}
