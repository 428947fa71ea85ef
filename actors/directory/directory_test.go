package directory_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/writer"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// counterStore is the "database" of the test owners: a counter per key that
// an owner loads on start and saves on every call.
type counterStore struct {
	mu     sync.Mutex
	counts map[string]int64
	alive  map[string]int // live owners per key; must never exceed 1
	maxAl  int
	spawns atomic.Int64
	// stopped is closed (and cleared) at the next stop.
	stopped chan struct{}
}

func (s *counterStore) start(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alive[key]++
	if s.alive[key] > s.maxAl {
		s.maxAl = s.alive[key]
	}
	s.spawns.Add(1)
	return s.counts[key]
}

func (s *counterStore) stop(key string) {
	s.mu.Lock()
	s.alive[key]--
	if s.stopped != nil {
		close(s.stopped)
		s.stopped = nil
	}
	s.mu.Unlock()
}

// live is the number of live owners, and a channel closed at the next
// stop.
func (s *counterStore) live() (int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, a := range s.alive {
		n += a
	}
	if s.stopped == nil {
		s.stopped = make(chan struct{})
	}
	return n, s.stopped
}

func (s *counterStore) save(key string, n int64) {
	s.mu.Lock()
	s.counts[key] = n
	s.mu.Unlock()
}

// owner counts calls for its key; its count survives passivation only
// through the store, so a second live owner would lose increments.
type owner struct {
	key   string
	store *counterStore
	n     int64
}

func (o *owner) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		o.n = o.store.start(o.key)
	case *actor.Stopped:
		o.store.stop(o.key)
	case *directory.Call:
		o.n++
		o.store.save(o.key, o.n)
		m.Replier.Reply(&sessionv1.GetSessionResponse{Session: &sessionv1.Session{SessionId: o.key, MessageCount: o.n}}, nil)
	case *directory.Passivate:
		ctx.Stop(ctx.Self())
	}
}

func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(sys.Shutdown)
	return sys
}

func newDirectory(t *testing.T, sys *actor.ActorSystem, store *counterStore, adm *directory.Admission, live *directory.LiveOwners) *actor.PID {
	cfg := testConfig(store)
	cfg.Admission, cfg.Live = adm, live
	return sys.Root.Spawn(directory.Props(cfg))
}

// testConfig is a directory of test owners counting calls in store.
func testConfig(store *counterStore) directory.Config {
	return directory.Config{
		Kind: "test",
		Key: func(m proto.Message) (string, bool, error) {
			switch r := m.(type) {
			case *sessionv1.GetSessionRequest:
				if r.GetSessionId() == "" {
					return "", false, errs.InvalidArgument("session_id is empty")
				}
				return r.GetSessionId(), true, nil
			}
			return "", false, nil
		},
		Owner: func(key string, _ *actor.PID) *actor.Props {
			return actor.PropsFromProducer(func() actor.Actor { return &owner{key: key, store: store} })
		},
		Unkeyed: func(c *directory.Call) {
			c.Replier.Reply(&sessionv1.ListSessionsResponse{NextCursor: "unkeyed"}, nil)
		},
	}
}

func ask(t *testing.T, sys *actor.ActorSystem, pid *actor.PID, key string) int64 {
	return askVia(t, sys, pid, nil, key)
}

func askVia(t *testing.T, sys *actor.ActorSystem, pid *actor.PID, live *directory.LiveOwners, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := directory.AskOwner(ctx, sys.Root, pid, live, key, &sessionv1.GetSessionRequest{SessionId: key}, false)
	if err != nil {
		t.Fatalf("ask %s: %v", key, err)
	}
	return resp.(*sessionv1.GetSessionResponse).GetSession().GetMessageCount()
}

// Many goroutines call few keys while every owner is passivated over and
// over: no increment may be lost and no key may ever have two live owners.
// With LiveOwners, callers reach live owners directly (the fast path), and
// a request sent that way must never be lost to a passivating owner.
func TestOneOwnerPerKeyAcrossPassivation(t *testing.T) {
	t.Run("through the directory", func(t *testing.T) { oneOwnerPerKey(t, nil) })
	t.Run("live owners reached directly", func(t *testing.T) { oneOwnerPerKey(t, &directory.LiveOwners{}) })
}

func oneOwnerPerKey(t *testing.T, live *directory.LiveOwners) {
	sys := newSystem(t)
	store := &counterStore{counts: map[string]int64{}, alive: map[string]int{}}
	pid := newDirectory(t, sys, store, nil, live)
	keys := []string{"a", "b", "c", "d"}
	const goroutines, calls = 32, 200
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				askVia(t, sys, pid, live, keys[(g+i)%len(keys)])
				if i%10 == g%10 {
					// Passivate everything while other calls are queued.
					sys.Root.Send(pid, &directory.PassivateAll{})
				}
			}
		}(g)
	}
	wg.Wait()
	var total int64
	for _, k := range keys {
		total += ask(t, sys, pid, k) - 1 // minus this final call
	}
	if total != goroutines*calls {
		t.Fatalf("calls counted %d, want %d (an owner lost state)", total, goroutines*calls)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.maxAl != 1 {
		t.Fatalf("a key had %d live owners at once", store.maxAl)
	}
	if store.spawns.Load() <= int64(len(keys)) {
		t.Fatalf("passivation never happened (spawns %d); the test proves nothing", store.spawns.Load())
	}
}

func TestIdleOwnerPassivatesOnRequest(t *testing.T) {
	sys := newSystem(t)
	store := &counterStore{counts: map[string]int64{}, alive: map[string]int{}}
	pid := newDirectory(t, sys, store, nil, nil)
	ask(t, sys, pid, "k")
	n, err := sys.Root.RequestFuture(pid, &directory.CountOwners{}, 5*time.Second).Result()
	if err != nil || n.(int) != 1 {
		t.Fatalf("owners = %v, %v; want 1", n, err)
	}
	if got := ask(t, sys, pid, "k"); got != 2 {
		t.Fatalf("count = %d, want 2", got)
	}
}

func TestBareProtoRequestsFromFutures(t *testing.T) {
	sys := newSystem(t)
	store := &counterStore{counts: map[string]int64{}, alive: map[string]int{}}
	backlog := writer.NewBacklog(1, 1<<20)
	pid := newDirectory(t, sys, store, &directory.Admission{Backlog: backlog}, nil)
	res, err := sys.Root.RequestFuture(pid, &sessionv1.GetSessionRequest{SessionId: "x"}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := res.(*sessionv1.GetSessionResponse); !ok || r.GetSession().GetSessionId() != "x" {
		t.Fatalf("reply %T %v", res, res)
	}
	res, _ = sys.Root.RequestFuture(pid, &sessionv1.GetSessionRequest{}, 5*time.Second).Result()
	if e, ok := res.(*commonv1.Error); !ok || e.GetCode() != errs.InvalidArgumentCode {
		t.Fatalf("empty key: reply %v, want invalid argument", res)
	}
	res, _ = sys.Root.RequestFuture(pid, &sessionv1.ListSessionsRequest{}, 5*time.Second).Result()
	if r, ok := res.(*sessionv1.ListSessionsResponse); !ok || r.GetNextCursor() != "unkeyed" {
		t.Fatalf("unkeyed reply %v", res)
	}
	// The backlog's one slot is taken: a network sender is refused at once.
	if err := backlog.TryAcquire(1); err != nil {
		t.Fatalf("the replies did not give their slots back: %v", err)
	}
	res, _ = sys.Root.RequestFuture(pid, &sessionv1.GetSessionRequest{SessionId: "x"}, 5*time.Second).Result()
	if e, ok := res.(*commonv1.Error); !ok || e.GetCode() != errs.ResourceExhaustedCode {
		t.Fatalf("full backlog: reply %v, want resource exhausted", res)
	}
}

func TestAskHonoursContext(t *testing.T) {
	sys := newSystem(t)
	silent := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := directory.Ask(ctx, sys.Root, silent, &sessionv1.GetSessionRequest{SessionId: "x"})
	// The request was handed to the actor: it may still be carried out.
	if !errors.Is(err, errs.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want outcome unknown", err)
	}
}
