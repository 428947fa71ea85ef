package plan_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/writer"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func isInvalid(err error) bool { return errors.Is(err, errs.ErrInvalidArgument) }

// harness is one actor system with a store, the writer and the plans
// service on it; everything stops at cleanup, in reverse order.
type harness struct {
	sys   *actor.ActorSystem
	store *sqlite.Store
	gate  *gatedStore
	wr    *writer.Writer
	svc   *plan.Service
}

type storeKind int

const (
	inMemory storeKind = iota
	onDisk             // WAL, synchronous=FULL
)

func newHarness(tb testing.TB, kind storeKind, cfg plan.Config) *harness {
	tb.Helper()
	return newHarnessWith(tb, kind, cfg, writer.Config{}, nil)
}

// newHarnessWith is newHarness with the writer's config and, when
// wrap is set, the reader the plans service gets wrapped.
func newHarnessWith(tb testing.TB, kind storeKind, cfg plan.Config, wcfg writer.Config,
	wrap func(persistence.Reader) persistence.Reader) *harness {
	tb.Helper()
	h := &harness{}
	h.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	tb.Cleanup(h.sys.Shutdown)
	url := "memory:" + memName(tb)
	if kind == onDisk {
		url = filepath.Join(tb.TempDir(), "plans.db")
	}
	st, err := sqlite.Open(url)
	if err != nil {
		tb.Fatalf("open %s: %v", url, err)
	}
	tb.Cleanup(func() { st.Close() })
	h.store, h.gate = st, &gatedStore{Store: st, gw: &gatedWriter{}}
	wcfg.Logger = quiet
	h.wr, err = writer.Start(h.sys, h.gate, wcfg)
	if err != nil {
		tb.Fatalf("writer.Start: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h.wr.Stop(ctx)
	})
	reader := st.Reader()
	if wrap != nil {
		reader = wrap(reader)
	}
	h.svc, err = plan.Start(h.sys, h.wr, reader, cfg)
	if err != nil {
		tb.Fatalf("plan.Start: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.svc.Stop(ctx); err != nil {
			tb.Errorf("plan Stop: %v", err)
		}
	})
	return h
}

var memSeq struct {
	sync.Mutex
	n int
}

// memName gives every harness its own in-memory database.
func memName(tb testing.TB) string {
	memSeq.Lock()
	defer memSeq.Unlock()
	memSeq.n++
	name := filepath.Base(tb.Name())
	if len(name) > 40 {
		name = name[:40]
	}
	clean := []byte(name)
	for i, c := range clean {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			clean[i] = '-'
		}
	}
	return "plan-" + string(clean) + "-" + strconv.Itoa(memSeq.n)
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

// history reads every record of a plan, page by page.
func history(tb testing.TB, svc *plan.Service, planID string) []*planv1.ErrorRecord {
	tb.Helper()
	var all []*planv1.ErrorRecord
	from := int64(0)
	for from >= 0 {
		resp, err := svc.History(ctxT(tb), &planv1.HistoryRequest{PlanId: planID, FromSequence: from, Limit: 1000})
		if err != nil {
			tb.Fatalf("History from %d: %v", from, err)
		}
		all = append(all, resp.GetRecords()...)
		from = resp.GetNextSequence()
	}
	return all
}

// gatedStore wraps a Store so a test can hold the next Apply (to let
// requests queue behind it) and make it fail without touching the database.
type gatedStore struct {
	persistence.Store
	gw *gatedWriter
}

func (g *gatedStore) Writer() (persistence.Writer, error) {
	w, err := g.Store.Writer()
	if err != nil {
		return nil, err
	}
	g.gw.w = w
	return g.gw, nil
}

type gatedWriter struct {
	w persistence.Writer

	mu      sync.Mutex
	hold    chan struct{} // the next Apply signals entered, then waits for hold to close
	entered chan struct{}
	txErr   error // the next Apply rolls back with it
	cmdErr  error // the next Apply's commands all fail on their own with it
	// lostErr: the next Apply commits, then answers with it (as if the
	// answer of COMMIT were lost: OUTCOME_UNKNOWN).
	lostErr error
}

// armHold makes the next Apply wait; it returns a channel that receives
// when that Apply started and the function that lets it go on.
func (g *gatedStore) armHold() (entered <-chan struct{}, release func()) {
	g.gw.mu.Lock()
	defer g.gw.mu.Unlock()
	hold, ent := make(chan struct{}), make(chan struct{}, 1)
	g.gw.hold, g.gw.entered = hold, ent
	return ent, func() { close(hold) }
}

func (g *gatedStore) failNext(txErr, cmdErr error) {
	g.gw.mu.Lock()
	defer g.gw.mu.Unlock()
	g.gw.txErr, g.gw.cmdErr = txErr, cmdErr
}

// commitThenFailNext makes the next Apply commit and then answer err.
func (g *gatedStore) commitThenFailNext(err error) {
	g.gw.mu.Lock()
	defer g.gw.mu.Unlock()
	g.gw.lostErr = err
}

func (g *gatedWriter) Apply(ctx context.Context, batch []persistence.Command) ([]persistence.Result, error) {
	g.mu.Lock()
	hold, entered, txErr, cmdErr, lostErr := g.hold, g.entered, g.txErr, g.cmdErr, g.lostErr
	g.hold, g.entered, g.txErr, g.cmdErr, g.lostErr = nil, nil, nil, nil, nil
	g.mu.Unlock()
	if hold != nil {
		entered <- struct{}{}
		<-hold
	}
	if txErr != nil {
		return nil, txErr
	}
	if cmdErr != nil {
		res := make([]persistence.Result, len(batch))
		for i := range res {
			res[i].Err = cmdErr
		}
		return res, nil
	}
	if lostErr != nil {
		if _, err := g.w.Apply(ctx, batch); err != nil {
			return nil, err
		}
		return nil, lostErr
	}
	return g.w.Apply(ctx, batch)
}

func (g *gatedWriter) Release() { g.w.Release() }
