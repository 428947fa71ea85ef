package audit_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newSystem(tb testing.TB) *actor.ActorSystem {
	tb.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	tb.Cleanup(sys.Shutdown)
	return sys
}

// openFile opens a fresh file database (WAL, synchronous=FULL unless the
// query says otherwise) in a temporary directory.
func openFile(tb testing.TB, query string) (*sqlite.Store, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "audit.db")
	st, err := sqlite.Open(path + query)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	tb.Cleanup(func() { st.Close() })
	return st, path
}

// start starts the writer and the audit service on store; the writer's
// Stop runs at cleanup, before the store closes and the system shuts down.
func start(tb testing.TB, sys *actor.ActorSystem, store persistence.Store, cfg writer.Config, acfg ...audit.Config) *audit.Service {
	tb.Helper()
	svc, err := startErr(sys, store, cfg, acfg...)
	if err != nil {
		tb.Fatalf("start: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		svc.Writer().Stop(ctx)
	})
	return svc
}

// startErr starts the writer and the audit service on store, with no
// cleanup: the caller stops the writer.
func startErr(sys *actor.ActorSystem, store persistence.Store, cfg writer.Config, acfg ...audit.Config) (*audit.Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	w, err := writer.Start(sys, store, cfg)
	if err != nil {
		return nil, err
	}
	var ac audit.Config
	if len(acfg) > 0 {
		ac = acfg[0]
	}
	svc, err := audit.Start(sys, w, store.Reader(), ac)
	if err != nil {
		w.Stop(context.Background())
		return nil, err
	}
	return svc, nil
}

// gatedStore wraps a Store so a test can hold the next Apply (to let a
// batch form behind it) or fail Applies without touching the database.
type gatedStore struct {
	persistence.Store
	gw *gatedWriter
}

func gate(s persistence.Store) *gatedStore { return &gatedStore{Store: s, gw: &gatedWriter{}} }

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
	entered chan struct{}
	release chan struct{}
	fail    error
	applies int
}

// hold makes the next Apply signal entered and wait for release.
func (g *gatedStore) hold() (entered chan struct{}, release func()) {
	g.gw.mu.Lock()
	defer g.gw.mu.Unlock()
	entered, rel := make(chan struct{}, 1), make(chan struct{})
	g.gw.entered, g.gw.release = entered, rel
	var once sync.Once
	return entered, func() { once.Do(func() { close(rel) }) }
}

// failWith makes every Apply fail with err (nil: pass through again).
func (g *gatedStore) failWith(err error) {
	g.gw.mu.Lock()
	g.gw.fail = err
	g.gw.mu.Unlock()
}

func (g *gatedStore) applies() int {
	g.gw.mu.Lock()
	defer g.gw.mu.Unlock()
	return g.gw.applies
}

func (g *gatedWriter) Apply(ctx context.Context, batch []persistence.Command) ([]persistence.Result, error) {
	g.mu.Lock()
	entered, release, fail := g.entered, g.release, g.fail
	g.entered, g.release = nil, nil
	g.applies++
	g.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
		<-release
	}
	if fail != nil {
		return nil, fail
	}
	return g.w.Apply(ctx, batch)
}

func (g *gatedWriter) Release() { g.w.Release() }

// observer records what the writer reports.
type observer struct {
	mu        sync.Mutex
	batches   []int
	failures  int
	retried   int
	lost      int
	lastError error
	applyTime time.Duration
}

func (o *observer) BatchCommitted(commands, bytes int, dur time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.failures++
		o.lastError = err
		return
	}
	o.batches = append(o.batches, commands)
	o.applyTime += dur
}

func (o *observer) AsyncRetried(entries int, err error) {
	o.mu.Lock()
	o.retried += entries
	o.mu.Unlock()
}

func (o *observer) AsyncLost(entries int, err error) {
	o.mu.Lock()
	o.lost += entries
	o.mu.Unlock()
}

func (o *observer) snapshot() (batches []int, failures, retried, lost int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.batches...), o.failures, o.retried, o.lost
}

// listAll pages through every entry matching f.
func listAll(tb testing.TB, svc *audit.Service, f *auditv1.Filter) []*auditv1.AuditEntry {
	tb.Helper()
	var out []*auditv1.AuditEntry
	cursor := ""
	for {
		resp, err := svc.List(context.Background(), &auditv1.ListRequest{Filter: f, AfterEventId: cursor, Limit: audit.MaxListLimit})
		if err != nil {
			tb.Fatalf("list after %q: %v", cursor, err)
		}
		out = append(out, resp.Entries...)
		if resp.NextCursor == "" {
			return out
		}
		cursor = resp.NextCursor
	}
}

func record(tb testing.TB, svc *audit.Service, req *auditv1.RecordRequest) *auditv1.AuditEntry {
	tb.Helper()
	resp, err := svc.Record(context.Background(), req)
	if err != nil {
		tb.Fatalf("record %v: %v", req, err)
	}
	return resp.Entry
}

func mustVerify(tb testing.TB, svc *audit.Service) *auditv1.VerifyResponse {
	tb.Helper()
	v, err := svc.Verify(context.Background(), &auditv1.VerifyRequest{})
	if err != nil {
		tb.Fatalf("verify: %v", err)
	}
	if !v.Ok {
		tb.Fatalf("verify: chain broken at %s after %d entries: %s", v.FirstBrokenEventId, v.EntriesChecked, v.Reason)
	}
	return v
}
