package audittest

import (
	"context"
	"sync"
	"time"

	"github.com/agentstate/agentstate/persistence"
)

// GatedStore wraps a Store so a test can hold the next Apply (to let a
// batch form behind it) or fail Applies without touching the database.
type GatedStore struct {
	persistence.Store
	gw *gatedWriter
}

// Gate wraps s; hand the result to writer.Start.
func Gate(s persistence.Store) *GatedStore { return &GatedStore{Store: s, gw: &gatedWriter{}} }

// Writer wraps the store's Writer.
func (g *GatedStore) Writer() (persistence.Writer, error) {
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

// Hold makes the next Apply signal entered and wait for release.
func (g *GatedStore) Hold() (entered chan struct{}, release func()) {
	g.gw.mu.Lock()
	defer g.gw.mu.Unlock()
	entered, rel := make(chan struct{}, 1), make(chan struct{})
	g.gw.entered, g.gw.release = entered, rel
	var once sync.Once
	return entered, func() { once.Do(func() { close(rel) }) }
}

// FailWith makes every Apply fail with err (nil: pass through again).
func (g *GatedStore) FailWith(err error) {
	g.gw.mu.Lock()
	g.gw.fail = err
	g.gw.mu.Unlock()
}

// Applies counts the transactions attempted so far.
func (g *GatedStore) Applies() int {
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

// Observer records what the writer reports (a writer.Observer).
type Observer struct {
	mu        sync.Mutex
	batches   []int
	failures  int
	retried   int
	lost      int
	applyTime time.Duration
}

func (o *Observer) BatchCommitted(commands, bytes int, dur time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.failures++
		return
	}
	o.batches = append(o.batches, commands)
	o.applyTime += dur
}

func (o *Observer) AsyncRetried(entries int, err error) {
	o.mu.Lock()
	o.retried += entries
	o.mu.Unlock()
}

func (o *Observer) AsyncLost(entries int, err error) {
	o.mu.Lock()
	o.lost += entries
	o.mu.Unlock()
}

// Snapshot is the commands of each committed transaction, the rolled-back
// transactions, and the async entries retried and lost so far.
func (o *Observer) Snapshot() (batches []int, failures, retried, lost int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.batches...), o.failures, o.retried, o.lost
}

// ApplyTime is the time the committed transactions spent in Apply.
func (o *Observer) ApplyTime() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.applyTime
}
